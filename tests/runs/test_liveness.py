"""A run is not lost for the silence of the platform's own outage (runs.liveness)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from npulab.runs.liveness import Hearing
from npulab.runs.models import Run
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import do_claim_run, do_submit_run, sweep_runs

pytestmark = pytest.mark.django_db

GAP = timedelta(seconds=30)


def silent_run(owner, host, settings) -> tuple[Run, timedelta]:
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu"})
    place_queued_runs()
    do_claim_run(host, run.pk, 1)
    timeout = timedelta(seconds=settings.NPULAB["RUN_HEARTBEAT_TIMEOUT_S"])
    Run.objects.filter(pk=run.pk).update(last_heartbeat=timezone.now() - 2 * timeout)
    return run, timeout


def test_a_silent_run_is_lost_once_the_platform_has_listened_for_the_whole_timeout(
    owner, cpu_host, settings
) -> None:
    run, timeout = silent_run(owner, cpu_host, settings)
    now = timezone.now()
    # Back from an outage a moment ago: the silence may be the platform's own.
    assert sweep_runs(now, heard_since=now - timeout / 2)["lost"] == 0
    assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING
    # Listening for longer than the timeout and still nothing: lost.
    assert sweep_runs(now, heard_since=now - timeout - timedelta(seconds=1))["lost"] == 1
    assert Run.objects.get(pk=run.pk).status == Run.Status.LOST


def test_the_hearing_starts_again_after_a_gap_between_sweeps() -> None:
    hearing = Hearing()
    start = timezone.now()
    assert hearing.since(start, GAP) == start
    hearing.heard(start)
    later = start + GAP / 2
    assert hearing.since(later, GAP) == start
    # The database was down: the sweeps in between failed and never said they were heard.
    hearing.heard(later)
    back = later + 3 * GAP
    assert hearing.since(back, GAP) == back
    hearing.heard(back)
    assert hearing.since(back + GAP / 2, GAP) == back
