"""Placement: which queued run goes to which host's devices.

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
from collections import defaultdict
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from npulab.core.durability import commit_without_flush
from npulab.health.selectors import closed_devices, placement_block
from npulab.hosts.models import Host
from npulab.runs.models import DeviceLease, Run
from npulab.runs.services import do_dispatch_run, waiting_for_host

log = logging.getLogger(__name__)

MAX_RUNS_PER_PASS = 500
MAX_HOSTS_IN_REASON = 4


@dataclass
class Capacity:
    """A host as the scheduler sees it during one pass."""

    host: Host
    alive: bool
    free: list[int] = field(default_factory=list)

    def excluded(self, run: Run) -> str:
        """Why this host is out of the question for the run whatever its load, or ""."""
        host = self.host
        if not host.enabled:
            return "is disabled"
        if host.devices_unverified:
            return host.devices_unverified
        if not self.alive:
            return "is offline"
        # Drained, unhealthy, offline by its health rules (npulab.health): not now.
        blocked = placement_block(host)
        if blocked:
            return blocked
        return run.unsuited_host(host)

    def unfit(self, run: Run) -> str:
        """Why the run cannot go here now, or "" if it can."""
        excluded = self.excluded(run)
        if excluded:
            return excluded
        total = self.host.device_count
        if total < run.devices:
            return f"has {total} {self.host.device_type} device(s), the run needs {run.devices}"
        if len(self.free) < run.devices:
            return f"has {len(self.free)} of {total} devices free, the run needs {run.devices}"
        return ""


def plan(run: Run, capacities: list[Capacity]) -> tuple[Capacity | None, str]:
    """The host to place ``run`` on, or None and the reason it stays queued."""
    if run.requested_host:
        named = [cap for cap in capacities if cap.host.name == run.requested_host]
        if not named:
            return None, f"host '{run.requested_host}' does not exist"
        why = named[0].unfit(run)
        return (None, f"host '{run.requested_host}' {why}") if why else (named[0], "")

    fits = [cap for cap in capacities if not cap.unfit(run)]
    if fits:
        # A restarted run goes to a host where it has not failed, when one fits.
        return min(
            fits,
            key=lambda cap: (run.failed_hosts.get(cap.host.name, 0), len(cap.free), cap.host.name),
        ), ""

    wanted = f"{run.device_type} host" + (
        " with label(s) " + ", ".join(run.labels) if run.labels else ""
    )
    matching = [cap for cap in capacities if not cap.excluded(run)]
    if not matching:
        typed = [cap for cap in capacities if cap.host.device_type == run.device_type]
        why = ", ".join(
            f"{cap.host.name} {cap.excluded(run)}" for cap in typed[:MAX_HOSTS_IN_REASON]
        )
        return None, f"no online {wanted}" + (f" ({why})" if why else "")
    plural = "s" if run.devices != 1 else ""
    busy = ", ".join(
        f"{cap.host.name}: {len(cap.free)} of {cap.host.device_count} free"
        for cap in matching[:MAX_HOSTS_IN_REASON]
    )
    more = ", …" if len(matching) > MAX_HOSTS_IN_REASON else ""
    return None, (
        f"no online host with {run.devices} free {run.device_type} device{plural} ({busy}{more})"
    )


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
        leased: dict[int, set[int]] = defaultdict(set)
        for host_id, index in DeviceLease.objects.values_list("host_id", "device_index"):
            leased[host_id].add(index)
        # Bad or unhealthy devices are never free (npulab.health).
        for host_id, indices in closed_devices().items():
            leased[host_id] |= indices
        capacities = [
            Capacity(
                host=host,
                alive=host.is_alive(now),
                free=[i for i in range(host.device_count) if i not in leased[host.id]],
            )
            for host in hosts
        ]
        # The pools of each run's project (Run.pool_ids) in two queries, without a lock.
        queued = (
            Run.objects.select_for_update()
            .filter(status=Run.Status.QUEUED)
            .prefetch_related("project__pools")
        )
        for run in queued.order_by("-priority", "created", "id")[:MAX_RUNS_PER_PASS]:
            chosen, reason = plan(run, capacities)
            if chosen is None and run.queue_expires_at is not None:
                # Waiting for a host that could take it: say that, not which is busy.
                _, why = run.unplaceable(hosts)
                reason = waiting_for_host(why, run.queue_expires_at) if why else reason
            if chosen is None:
                if run.queue_reason != reason:
                    run.queue_reason = reason
                    run.save(update_fields=["queue_reason", "updated"])
                continue
            indices, chosen.free = chosen.free[: run.devices], chosen.free[run.devices :]
            do_dispatch_run(run, chosen.host, indices, now)
            placed.append(run.id)
    if placed:
        log.info("placed runs %s", placed)
    return placed
