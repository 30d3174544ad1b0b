"""The scheduler skips unhealthy hosts and bad devices, in the same few queries."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from npulab.health.services import do_clear_device, mark_device_bad
from npulab.runs.models import Run
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import do_submit_run
from tests.health.npu_samples import ALARM_310B4, WARNING_8CARD, samples

pytestmark = pytest.mark.django_db


def submit(owner, devices: int = 1, **extra) -> Run:
    return do_submit_run(
        owner, {"kind": "smoke", "device_type": "npu", "devices": devices, **extra}
    )


def placed(run: Run) -> Run:
    place_queued_runs()
    run.refresh_from_db()
    return run


def test_an_unhealthy_host_is_skipped_for_a_healthy_one(owner, npu_host, send) -> None:
    # The alarmed host is the better fit (fewest free devices), so only health can skip it.
    sick = npu_host("npu-alarm", devices=1)
    fine = npu_host("npu-fine", devices=8)
    send(sick, lambda t: samples(ALARM_310B4, t))
    run = placed(submit(owner))
    assert run.host == fine


def test_a_degraded_host_still_takes_runs(owner, npu_host, send) -> None:
    host = npu_host("npu-warn")
    send(host, lambda t: samples(WARNING_8CARD, t))
    run = placed(submit(owner, devices=8))
    assert run.host == host


def test_a_bad_device_is_never_leased(owner, npu_host, operator) -> None:
    host = npu_host("npu-01", devices=2)
    mark_device_bad(host, 0, "stability run failed")
    first = placed(submit(owner))
    assert (first.host, first.device_indices) == (host, [1])
    both = placed(submit(owner, devices=2))
    assert both.status == "queued"
    assert "npu-01: 0 of 2 free" in both.queue_reason
    do_clear_device(host, 0, operator, "reseated the card")
    single = placed(submit(owner))
    assert single.device_indices == [0]


def test_placement_takes_the_same_queries_for_one_host_or_many(owner, npu_host, send) -> None:
    def count(hosts: int) -> int:
        for i in range(hosts):
            host = npu_host(f"npu-{hosts}-{i}", devices=1)
            mark_device_bad(host, 0, "bad")  # every host has health rows to read
        submit(owner)
        with CaptureQueriesContext(connection) as queries:
            place_queued_runs()
        Run.objects.all().delete()
        return len(queries)

    assert count(1) == count(6)
