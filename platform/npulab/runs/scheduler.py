"""The placement pass: which queued run goes to which host's devices, by the rules of
``runs.placement``.

A run asks for ``devices`` devices of one ``device_type``, optionally on a
named host or on hosts carrying all of its labels. Runs are considered in
priority order, then submission order. A run that does not fit does not
block smaller runs behind it (no reservation yet). Among the hosts that fit,
the one left with the fewest free devices wins (best fit), which keeps whole
hosts free for large runs; a restarted run prefers hosts where it has not
failed and never returns to one that was to blame twice (``Run.host_faults``:
a lost worker is not the host's fault, so one host keeps every restart).
Nothing new goes to a host that its health (``npulab.health``) says is
drained, unhealthy or offline, nor to a bad or unhealthy device; such a
host still counts as one that could take the run (it comes back), and a run
waiting for it says why ("cpu-01 is drained: <note>").

A run that no registered host could ever take is refused at submission
unless it asked to wait for one (``wait_for_host``); while it waits, its
queue reason says what is missing, and the sweeper ends it as expired when
none came in time (``NPULAB_QUEUE_EXPIRY_S``).
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from npulab.core.durability import commit_without_flush
from npulab.hosts.models import Host
from npulab.runs.models import Run
from npulab.runs.placement import capacities, plan_gang, unplaceable, waiting_for_host
from npulab.runs.services import do_dispatch_run

log = logging.getLogger(__name__)

MAX_RUNS_PER_PASS = 500


def place_queued_runs() -> list[int]:
    """One placement pass; returns the ids of the runs dispatched."""
    now = timezone.now()
    placed: list[int] = []
    with transaction.atomic():
        # A placement that a database crash loses repairs itself: the host it was sent to
        # is refused the claim, and the run, queued again, goes with the next pass. So its
        # commit need not wait for the disk, which is most of a pass's time on PostgreSQL.
        commit_without_flush()
        # Locking every host row serialises placement passes on PostgreSQL;
        # SQLite's IMMEDIATE transactions already do. The unique lease
        # constraint backs both.
        # The health row comes in the same query; "of" keeps the lock off its nullable side.
        hosts = list(
            Host.objects.select_related("health").select_for_update(of=("self",)).order_by("id")
        )
        caps = capacities(hosts, now)
        # The pools of each run's project (Run.pool_ids) in two queries, without a lock.
        queued = (
            Run.objects.select_for_update()
            .filter(status=Run.Status.QUEUED)
            .prefetch_related("project__pools")
        )
        for run in queued.order_by("-priority", "created", "id")[:MAX_RUNS_PER_PASS]:
            chosen, reason = plan_gang(run, caps)
            if not chosen and run.queue_expires_at is not None:
                # Waiting for a host that could take it: say that, not which is busy.
                _, why = unplaceable(run, hosts)
                reason = waiting_for_host(why, run.queue_expires_at) if why else reason
            if not chosen:
                if run.queue_reason != reason:
                    run.queue_reason = reason
                    run.save(update_fields=["queue_reason", "updated"])
                continue
            # A gang is leased whole, in this transaction, or not at all.
            shares = []
            for cap in chosen:
                indices, cap.free = cap.free[: run.devices], cap.free[run.devices :]
                shares.append((cap.host, indices))
            do_dispatch_run(run, shares, now)
            placed.append(run.id)
    if placed:
        log.info("placed runs %s", placed)
    return placed
