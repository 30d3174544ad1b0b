"""Control-plane tasks of the runs app (queue "control")."""

from __future__ import annotations

from celery import shared_task

from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import sweep_runs


@shared_task(name="runs.place_runs", ignore_result=True)
def place_runs_task() -> int:
    return len(place_queued_runs())


@shared_task(name="runs.sweep_runs", ignore_result=True)
def sweep_runs_task() -> dict[str, int]:
    return sweep_runs()
