from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from npulab.hosts.models import Host
from npulab.runs.models import DeviceLease, Run
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import do_submit_run
from tests.conftest import register
from tests.factories import HostFactory

pytestmark = pytest.mark.django_db


def npu_host(name: str, devices: int = 8, **kwargs: object) -> Host:
    return register(HostFactory(name=name, **kwargs), "npu", devices)


def submit(owner: object, devices: int = 1, device_type: str = "npu", **extra: object) -> Run:
    return do_submit_run(
        owner, {"kind": "smoke", "device_type": device_type, "devices": devices, **extra}
    )


def test_a_run_is_placed_with_a_lease_and_an_execute_message(owner, sent_tasks) -> None:
    host = npu_host("npu-01")
    run = submit(owner, devices=2)
    assert place_queued_runs() == [run.pk]
    run.refresh_from_db()
    assert run.status == Run.Status.DISPATCHED
    assert run.host == host
    assert run.device_indices == [0, 1]
    assert sorted(DeviceLease.objects.values_list("device_index", flat=True)) == [0, 1]
    # Sent on commit only: Django's test transaction never commits here.
    assert sent_tasks == []


def test_the_message_goes_out_when_the_transaction_commits(
    owner, sent_tasks, django_capture_on_commit_callbacks
) -> None:
    npu_host("npu-01")
    run = submit(owner)
    with django_capture_on_commit_callbacks(execute=True):
        place_queued_runs()
    assert sent_tasks == [{"task": "runs.execute_run", "args": [run.pk, 1], "queue": "host.npu-01"}]


def test_a_run_that_does_not_fit_stays_queued_with_the_reason(owner) -> None:
    npu_host("npu-01", devices=8)
    busy = submit(owner, devices=6)
    place_queued_runs()
    waiting = submit(owner, devices=8)
    place_queued_runs()
    waiting.refresh_from_db()
    assert waiting.status == Run.Status.QUEUED
    assert waiting.queue_reason == "no online host with 8 free npu devices (npu-01: 2 of 8 free)"
    busy.refresh_from_db()
    assert busy.status == Run.Status.DISPATCHED


def test_a_disabled_host_is_named_in_the_reason(owner) -> None:
    npu_host("npu-01", enabled=False)
    register(HostFactory(name="cpu-01"), "cpu", 1)
    run = submit(owner)
    place_queued_runs()
    run.refresh_from_db()
    assert run.queue_reason == "no online npu host (npu-01 is disabled)"


def test_a_named_host_is_the_only_candidate(owner) -> None:
    npu_host("npu-01")
    npu_host("npu-02", devices=2)
    submit(owner, devices=2, host="npu-02")
    place_queued_runs()
    run = submit(owner, devices=2, host="npu-02")
    place_queued_runs()
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    assert run.queue_reason == "host 'npu-02' has 0 of 2 devices free, the run needs 2"


def test_a_silent_host_is_offline_for_placement(owner) -> None:
    host = npu_host("npu-01")
    Host.objects.filter(pk=host.pk).update(last_heartbeat=timezone.now() - timedelta(hours=1))
    run = submit(owner, host="npu-01")
    place_queued_runs()
    run.refresh_from_db()
    assert run.queue_reason == "host 'npu-01' is offline"


def test_a_run_waiting_for_a_host_says_what_is_missing(owner) -> None:
    npu_host("npu-01")
    run = submit(owner, device_type="cuda", host="npu-01", wait_for_host=True)
    place_queued_runs()
    run.refresh_from_db()
    assert run.queue_reason.startswith(
        "no registered host could take it (host 'npu-01' has 8 npu devices, the run needs cuda); "
        "waiting for one until "
    )


def test_a_host_that_changed_after_the_submission_is_explained(owner) -> None:
    host = npu_host("npu-01")
    run = submit(owner, host="npu-01")
    register(host, "cuda", 8)
    place_queued_runs()
    run.refresh_from_db()
    assert run.queue_reason == "host 'npu-01' has cuda devices, the run needs npu"


def test_priority_then_submission_order(owner) -> None:
    npu_host("npu-01", devices=1)
    first = submit(owner)
    second = submit(owner)
    urgent = submit(owner, priority=10)
    assert place_queued_runs() == [urgent.pk]
    DeviceLease.objects.all().delete()
    Run.objects.filter(pk=urgent.pk).update(status=Run.Status.SUCCEEDED)
    assert place_queued_runs() == [first.pk]
    assert Run.objects.get(pk=second.pk).status == Run.Status.QUEUED


def test_smaller_runs_fill_gaps_behind_a_big_one(owner) -> None:
    npu_host("npu-01", devices=4)
    first = submit(owner, devices=2)
    assert place_queued_runs() == [first.pk]
    big = submit(owner, devices=4)
    small = submit(owner, devices=2)
    assert place_queued_runs() == [small.pk]
    assert Run.objects.get(pk=big.pk).status == Run.Status.QUEUED


def test_best_fit_keeps_whole_hosts_free(owner) -> None:
    npu_host("npu-big", devices=8)
    npu_host("npu-small", devices=2)
    run = submit(owner, devices=2)
    place_queued_runs()
    run.refresh_from_db()
    assert run.host.name == "npu-small"


def test_labels_must_all_be_present(owner) -> None:
    npu_host("npu-01", labels=["910b"])
    npu_host("npu-02", labels=["910b", "cann-8.1"])
    run = submit(owner, labels=["910b", "cann-8.1"])
    place_queued_runs()
    run.refresh_from_db()
    assert run.host.name == "npu-02"


def test_no_device_is_ever_leased_twice(owner) -> None:
    npu_host("npu-01", devices=8)
    runs = [submit(owner, devices=3) for _ in range(4)]
    place_queued_runs()
    place_queued_runs()
    leased = list(DeviceLease.objects.values_list("device_index", flat=True))
    assert len(leased) == len(set(leased)) == 6
    assert [Run.objects.get(pk=r.pk).status for r in runs].count(Run.Status.DISPATCHED) == 2
