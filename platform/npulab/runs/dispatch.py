"""The messages the platform sends: placement requests and "execute run N, attempt K".

Both are sent only after the transaction that made them necessary commits
(callers use ``transaction.on_commit``). A failed send is logged, not
raised: the run row stays the truth, and the scheduler tick and the
dispatch timeout repair a lost message.
"""

from __future__ import annotations

import logging

from npulab.celery import app
from workers.contract.tasks import CONTROL_QUEUE, EXECUTE_RUN, PLACE_RUNS

log = logging.getLogger(__name__)


def request_placement() -> None:
    try:
        app.send_task(PLACE_RUNS, queue=CONTROL_QUEUE)
    except Exception:
        log.exception("could not request placement; the scheduler tick will retry")


def send_execute(run_id: int, attempt: int, queue: str) -> None:
    try:
        app.send_task(EXECUTE_RUN, args=[run_id, attempt], queue=queue)
    except Exception:
        log.exception("could not dispatch run %s; the dispatch timeout requeues it", run_id)
