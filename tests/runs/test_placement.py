"""Runs no registered host could ever take: refused at submission, or waiting until they expire."""

from __future__ import annotations

from datetime import UTC, timedelta

import pytest
from django.utils import timezone

from npulab.core.errors import SubmissionInvalid
from npulab.hosts.models import Host
from npulab.runs.models import Run
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import NO_HOST_HINT, do_restart_run, do_submit_run, sweep_runs
from npulab.runs.tasks import sweep_runs_task
from tests.conftest import register
from tests.factories import HostFactory

pytestmark = pytest.mark.django_db
RUNS = "/api/v1/runs/"


def smoke(**fields: object) -> dict:
    return {"kind": "smoke", "device_type": "cpu", **fields}


def until(run: Run) -> str:
    return f"{run.queue_expires_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


@pytest.fixture
def hosts(db: None) -> None:
    """cpu-01 with one device, cpu-02 with two and the label 910b-lab."""
    register(HostFactory(name="cpu-01"), "cpu", 1)
    register(HostFactory(name="cpu-02", labels=["910b-lab"]), "cpu", 2)


@pytest.mark.parametrize(
    ("fields", "field", "why"),
    [
        (
            {"devices": 4},
            "devices",
            "no cpu host has 4 devices: cpu-01 has 1, cpu-02 has 2",
        ),
        (
            {"device_type": "npu"},
            "device_type",
            "no npu host is registered: cpu-01 has 1 cpu device, cpu-02 has 2 cpu devices",
        ),
        (
            {"labels": ["a3"]},
            "labels",
            "no cpu host carries label(s) a3: cpu-01 has none, cpu-02 has 910b-lab",
        ),
        (
            {"labels": ["910b-lab"], "devices": 3},
            "devices",
            "no cpu host with label(s) 910b-lab has 3 devices: cpu-02 has 2",
        ),
        (
            {"host": "cpu-01", "device_type": "npu"},
            "device_type",
            "host 'cpu-01' has 1 cpu device, the run needs npu",
        ),
        (
            {"host": "cpu-01", "devices": 2},
            "devices",
            "host 'cpu-01' has 1 cpu device, the run needs 2",
        ),
        (
            {"host": "cpu-01", "labels": ["910b-lab"]},
            "labels",
            "host 'cpu-01' lacks label(s) 910b-lab",
        ),
        (
            {"host": "nope"},
            "host",
            "no host named 'nope'; the hosts are cpu-01, cpu-02",
        ),
    ],
)
def test_a_run_no_host_could_take_is_refused_with_what_exists(
    api, hosts: None, fields: dict, field: str, why: str
) -> None:
    response = api.post(RUNS, smoke(**fields), format="json")
    assert response.status_code == 400
    body = response.json()
    message = why + NO_HOST_HINT
    assert body[field] == [message]
    assert body["detail"] == f"{field}: {message}"
    assert Run.objects.count() == 0


def test_without_any_host_the_refusal_says_so(owner) -> None:
    with pytest.raises(SubmissionInvalid) as caught:
        do_submit_run(owner, smoke())
    assert caught.value.errors == {
        "device_type": "no host is registered yet (the run needs a cpu host)" + NO_HOST_HINT
    }


def test_a_disabled_or_offline_host_still_counts(owner, hosts: None) -> None:
    Host.objects.filter(name="cpu-02").update(
        enabled=False, last_heartbeat=timezone.now() - timedelta(days=1)
    )
    run = do_submit_run(owner, smoke(devices=2))
    assert (run.status, run.queue_expires_at) == ("queued", None)


def test_a_named_host_whose_worker_never_registered_is_not_held_against_the_run(owner) -> None:
    HostFactory(name="npu-new")
    run = do_submit_run(owner, smoke(device_type="npu", devices=8, host="npu-new"))
    assert run.status == "queued"


def test_wait_for_host_must_be_a_boolean(owner, hosts: None) -> None:
    with pytest.raises(SubmissionInvalid) as caught:
        do_submit_run(owner, smoke(wait_for_host="yes"))
    assert caught.value.errors == {"wait_for_host": "must be true or false"}


def test_a_run_may_wait_for_a_host_and_says_why_it_waits(api, hosts: None, settings) -> None:
    before = timezone.now()
    response = api.post(RUNS, smoke(devices=4, wait_for_host=True), format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["status"], body["wait_for_host"]) == ("queued", True)
    run = Run.objects.get(pk=body["id"])
    expiry = timedelta(seconds=settings.NPULAB["QUEUE_EXPIRY_S"])
    assert before + expiry <= run.queue_expires_at <= timezone.now() + expiry
    assert body["queue_expires_at"] == run.queue_expires_at.isoformat().replace("+00:00", "Z")
    reason = (
        "no registered host could take it (no cpu host has 4 devices: cpu-01 has 1, "
        f"cpu-02 has 2); waiting for one until {until(run)}"
    )
    assert body["queue_reason"] == reason
    # The scheduler keeps the reason: which host is busy is not the point.
    place_queued_runs()
    run.refresh_from_db()
    assert (run.status, run.queue_reason) == ("queued", reason)


def test_a_run_may_wait_for_a_host_that_does_not_exist_yet(owner, hosts: None) -> None:
    run = do_submit_run(owner, smoke(host="cpu-09", wait_for_host=True))
    assert run.queue_reason == (
        "no registered host could take it (no host named 'cpu-09'; "
        f"the hosts are cpu-01, cpu-02); waiting for one until {until(run)}"
    )
    register(HostFactory(name="cpu-09"), "cpu", 1)
    assert place_queued_runs() == [run.pk]


def test_a_run_that_waits_in_vain_expires_when_the_sweeper_passes(owner, hosts: None) -> None:
    run = do_submit_run(owner, smoke(devices=4, wait_for_host=True))
    assert run.queue_expires_at is not None
    just_before = run.queue_expires_at - timedelta(seconds=1)
    assert sweep_runs(just_before)["expired"] == 0
    assert sweep_runs(run.queue_expires_at)["expired"] == 1
    run.refresh_from_db()
    assert (run.status, run.is_active, run.infrastructure_failure) == ("expired", False, True)
    assert run.finished_at == run.queue_expires_at
    # It never ran, so no exit cause: its status names how it ended on the page.
    assert (run.exit_cause, run.exit_cause_label) == ("", "Expired")
    assert run.exit_reason == (
        "no host that could take the run registered within 24 h: "
        "no cpu host has 4 devices: cpu-01 has 1, cpu-02 has 2"
    )
    assert run.queue_reason == ""


def test_the_sweeper_task_expires_runs(owner, hosts: None, settings) -> None:
    run = do_submit_run(owner, smoke(device_type="npu", wait_for_host=True))
    assert sweep_runs_task() == {"requeued": 0, "lost": 0, "expired": 0}
    Run.objects.filter(pk=run.pk).update(queue_expires_at=timezone.now() - timedelta(seconds=1))
    assert sweep_runs_task()["expired"] == 1
    assert Run.objects.get(pk=run.pk).status == "expired"


def test_a_run_a_host_could_take_by_then_does_not_expire(owner, hosts: None) -> None:
    run = do_submit_run(owner, smoke(devices=4, wait_for_host=True))
    register(HostFactory(name="cpu-04"), "cpu", 4)
    # Drained, but it could take the run: queued like any run, no longer on an expiry.
    Host.objects.filter(name="cpu-04").update(enabled=False)
    assert sweep_runs(run.queue_expires_at)["expired"] == 0
    run.refresh_from_db()
    assert (run.status, run.queue_expires_at) == ("queued", None)
    assert sweep_runs(timezone.now() + timedelta(days=30))["expired"] == 0


def test_an_expired_run_restarts_and_waits_again(owner, hosts: None, settings) -> None:
    run = do_submit_run(owner, smoke(devices=4, wait_for_host=True))
    sweep_runs(run.queue_expires_at)
    run = do_restart_run(run.pk, owner)
    assert run.status == "queued"
    assert run.queue_reason.startswith("no registered host could take it (no cpu host has 4")
    assert run.queue_expires_at > timezone.now()


def test_the_api_filters_expired_runs(api, owner, hosts: None) -> None:
    run = do_submit_run(owner, smoke(devices=4, wait_for_host=True))
    do_submit_run(owner, smoke())
    sweep_runs(run.queue_expires_at)
    body = api.get(RUNS, {"status": "expired"}).json()
    assert [found["id"] for found in body["results"]] == [run.pk]
