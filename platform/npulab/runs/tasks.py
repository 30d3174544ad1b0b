"""Control-plane tasks of the runs app (queue "control")."""

from __future__ import annotations

from celery import shared_task

from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import sweep_runs
from workers.contract.tasks import PLACE_RUNS, SWEEP_RUNS


@shared_task(name=PLACE_RUNS, ignore_result=True)
def place_runs_task() -> int:
    return len(place_queued_runs())


@shared_task(name=SWEEP_RUNS, ignore_result=True)
def sweep_runs_task() -> dict[str, int]:
    return sweep_runs()
