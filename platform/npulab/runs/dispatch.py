"""The messages the platform sends: placement requests and "execute run N, attempt K".

Both are sent only after the transaction that made them necessary commits
(callers use ``transaction.on_commit``). A failed send is logged, not
raised: the run row stays the truth, and the scheduler tick and the
dispatch timeout repair a lost message.

A submission is placed where it was made when it is the only queued run
(``place_submitted``): the same placement pass the control worker runs,
without the broker hop and the task in between.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kombu.exceptions import OperationalError

from npulab.celery import app
from npulab.runs.models import Run
from workers.contract.tasks import CONTROL_QUEUE, EXECUTE_RUN, PLACE_RUNS

log = logging.getLogger(__name__)

# The placement pass (``npulab.runs.scheduler.place_queued_runs``). The scheduler sits above
# the write paths (it dispatches through them) and they send from here, so it is handed in
# from RunsConfig.ready rather than imported: runs' modules import each other one way only.
_placement_pass: Callable[[], object] | None = None


def set_placement_pass(placement_pass: Callable[[], object]) -> None:
    global _placement_pass
    _placement_pass = placement_pass


def place_submitted() -> None:
    """After a submission commits: place it in this process, or ask the control worker.

    Alone in the queue, the pass considers only the new run, so it stays short in
    the submitter's request. Behind other queued runs it would consider them all:
    that pass is the control worker's, as is one that fails here. Either way it is
    the one placement pass, and its host row locks keep racing passes apart.
    """
    try:
        queued = len(Run.objects.filter(status=Run.Status.QUEUED).values_list("pk")[:2])
        if queued == 1 and _placement_pass is not None:
            _placement_pass()
        elif queued:
            request_placement()
    except Exception:
        log.exception("could not place the submitted run at once; the control worker will")
        request_placement()


def request_placement() -> None:
    try:
        app.send_task(PLACE_RUNS, queue=CONTROL_QUEUE)
    except OperationalError as exc:
        # A broker outage is expected and repaired: one line per message, no traceback.
        log.warning(
            "could not request placement, the broker is unreachable (the scheduler tick "
            "retries): %s",
            exc,
        )
    except Exception:
        log.exception("could not request placement; the scheduler tick will retry")


def send_execute(run_id: int, attempt: int, queue: str) -> None:
    try:
        app.send_task(EXECUTE_RUN, args=[run_id, attempt], queue=queue)
    except OperationalError as exc:
        log.warning(
            "could not dispatch run %s, the broker is unreachable (the dispatch timeout "
            "requeues it): %s",
            run_id,
            exc,
        )
    except Exception:
        log.exception("could not dispatch run %s; the dispatch timeout requeues it", run_id)
