"""The control tick: the apps' periodic passes, in order, in one task."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from npulab.celery import app
from npulab.core.tasks import tick_task
from npulab.hosts.models import Host
from npulab.runs.models import Run
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import do_submit_run
from tests.conftest import register
from tests.factories import HostFactory
from workers.contract.tasks import TICK

pytestmark = pytest.mark.django_db

passes: list[str] = []


@app.task(name="tests.tick.breaks")
def breaks() -> None:
    passes.append("breaks")
    raise RuntimeError("broken on purpose")


@app.task(name="tests.tick.counts")
def counts() -> None:
    passes.append("counts")


def test_the_beat_sends_one_task_a_tick_and_it_names_registered_tasks(settings) -> None:
    app.loader.import_default_modules()
    tick_s = settings.NPULAB["SCHEDULER_TICK_S"]
    every_tick = [
        e["task"] for e in settings.CELERY_BEAT_SCHEDULE.values() if e["schedule"] == tick_s
    ]
    assert every_tick == [TICK]
    assert TICK in app.tasks
    assert set(settings.CONTROL_TICK) <= set(app.tasks)


def test_a_pass_that_fails_is_logged_and_the_next_still_runs(settings, caplog) -> None:
    settings.CONTROL_TICK = ("tests.tick.breaks", "tests.tick.counts")
    passes.clear()
    with caplog.at_level(logging.ERROR, logger="npulab.core.tasks"):
        assert tick_task() == ["tests.tick.breaks"]
    assert passes == ["breaks", "counts"]
    [record] = caplog.records
    assert record.getMessage() == "tests.tick.breaks failed in the control tick"
    assert "broken on purpose" in caplog.text


def test_one_tick_finds_the_silent_host_and_places_again_what_it_requeues(
    owner, cpu_host, settings
) -> None:
    silent = register(HostFactory(name="cpu-02"))
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu", "host": "cpu-01"})
    place_queued_runs()
    waited = timedelta(seconds=settings.NPULAB["DISPATCH_TIMEOUT_S"] + 1)
    Run.objects.filter(pk=run.pk).update(dispatched_at=timezone.now() - waited)
    stale = timedelta(seconds=settings.NPULAB["HOST_HEARTBEAT_TIMEOUT_S"] + 1)
    Host.objects.filter(pk=silent.pk).update(last_heartbeat=timezone.now() - stale)

    assert tick_task() == []

    silent.refresh_from_db()
    assert silent.status == Host.Status.OFFLINE
    # Requeued by the run sweep, then placed by the placement pass of the same tick.
    run.refresh_from_db()
    assert run.status == Run.Status.DISPATCHED
    assert run.host == cpu_host
    assert timezone.now() - run.dispatched_at < waited
