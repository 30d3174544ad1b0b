"""Control-plane tasks of the runs app (queue "control")."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from npulab.runs.liveness import Hearing
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import sweep_runs
from workers.contract.tasks import PLACE_RUNS, SWEEP_RUNS


@shared_task(name=PLACE_RUNS, ignore_result=True)
def place_runs_task() -> int:
    return len(place_queued_runs())


# This process's sweeps (the control worker runs one; see runs.liveness).
_hearing = Hearing()


@shared_task(name=SWEEP_RUNS, ignore_result=True)
def sweep_runs_task() -> dict[str, int]:
    now = timezone.now()
    # Sweeps come every scheduler tick: a quarter of the heartbeat timeout without a
    # successful one is an outage of the platform's own.
    gap = timedelta(seconds=settings.NPULAB["RUN_HEARTBEAT_TIMEOUT_S"] / 4)
    counts = sweep_runs(now, heard_since=_hearing.since(now, gap))
    _hearing.heard(now)
    return counts
