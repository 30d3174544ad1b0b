"""Restarts as new attempts, and the checkpoints a new attempt resumes from."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from npulab.checkpoints.models import Checkpoint
from npulab.hosts.services import do_issue_host_token
from npulab.runs.models import Run, RunAttempt
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import (
    do_claim_run,
    do_finish_run,
    do_ingest_events,
    do_submit_run,
    sweep_runs,
)
from npulab.series.models import MetricSeries
from tests.conftest import register
from tests.factories import HostFactory
from tests.series.blocks import stored_points

pytestmark = pytest.mark.django_db
TRAINING = {"kind": "training", "device_type": "cpu", "entry": "builtin:cnn"}


def started(owner, host, **spec) -> Run:
    run = do_submit_run(owner, {**TRAINING, **spec})
    place_queued_runs()
    run.refresh_from_db()
    return do_claim_run(host, run.pk, run.attempt)


def crash(
    host,
    run: Run,
    reason: str = "the training process exited with code 1",
    cause: str = "process_exit",
) -> Run:
    result = {
        "type": "result",
        "time": 1.0,
        "status": "failed",
        "reason": reason,
        "cause": cause,
    }
    offset = Run.objects.get(pk=run.pk).events_offset
    do_ingest_events(host, run.pk, run.attempt, offset, offset + 10, [result])
    return do_finish_run(host, run.pk, run.attempt, {"exit_code": 1})


def test_a_crashed_training_run_goes_on_as_a_new_attempt(owner, cpu_host) -> None:
    run = crash(cpu_host, started(owner, cpu_host, max_restarts=2))
    assert (run.status, run.attempt, run.restarts) == ("queued", 2, 1)
    assert run.failed_hosts == {"cpu-01": 1}
    assert run.queue_reason.startswith("attempt 1 ended on cpu-01 (process_exit: the training")
    assert run.exit_cause == ""
    first = RunAttempt.objects.get(run=run, number=1)
    assert (first.status, first.exit_cause, first.exit_code) == ("failed", "process_exit", 1)
    assert first.finished_at is not None


def test_a_job_error_is_not_restarted(owner, cpu_host) -> None:
    reason = "ModuleNotFoundError: No module named 'mymodel'"
    run = crash(cpu_host, started(owner, cpu_host, max_restarts=3), reason, cause="job_error")
    assert (run.status, run.attempt, run.restarts) == ("failed", 1, 0)
    assert (run.exit_cause, run.exit_reason, run.infrastructure_failure) == (
        "job_error",
        reason,
        False,
    )
    assert run.failed_hosts == {}


def test_restarts_run_out(owner, cpu_host) -> None:
    run = started(owner, cpu_host, max_restarts=1)
    run = crash(cpu_host, run)
    place_queued_runs()
    run.refresh_from_db()
    run = do_claim_run(cpu_host, run.pk, 2)
    run = crash(cpu_host, run)
    assert (run.status, run.attempt, run.restarts, run.exit_cause) == (
        "failed",
        2,
        1,
        "process_exit",
    )
    assert list(run.attempts.values_list("number", "status")) == [(1, "failed"), (2, "failed")]


def test_a_smoke_run_is_not_restarted(owner, cpu_host) -> None:
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu"})
    place_queued_runs()
    run = do_claim_run(cpu_host, run.pk, 1)
    assert do_finish_run(cpu_host, run.pk, 1, {"exit_code": -9}).status == "failed"


def test_a_timed_out_run_is_not_restarted(owner, cpu_host) -> None:
    run = started(owner, cpu_host)
    result = {"type": "result", "time": 1.0, "status": "failed", "reason": "x", "cause": "timeout"}
    do_ingest_events(cpu_host, run.pk, 1, 0, 10, [result])
    assert do_finish_run(cpu_host, run.pk, 1, {"exit_code": 1}).status == "failed"


def test_a_lost_host_restarts_the_run_elsewhere(owner, cpu_host, settings) -> None:
    run = started(owner, cpu_host)
    spare = register(HostFactory(name="cpu-02"), "cpu", 1)
    later = timezone.now() + timedelta(seconds=settings.NPULAB["RUN_HEARTBEAT_TIMEOUT_S"] + 1)
    sweep_runs(later)
    run.refresh_from_db()
    assert (run.status, run.attempt) == ("queued", 2)
    assert RunAttempt.objects.get(run=run, number=1).exit_cause == "worker_lost"
    place_queued_runs()
    run.refresh_from_db()
    # Both hosts are free; the one where the run did not fail wins.
    assert run.host == spare


def crash_twice_on(host, run: Run) -> Run:
    run = crash(host, run)
    place_queued_runs()
    run.refresh_from_db()
    return crash(host, do_claim_run(host, run.pk, run.attempt))


def test_a_host_that_failed_a_run_twice_never_gets_it_again(owner, cpu_host) -> None:
    HostFactory(name="cpu-02", device_type="cpu")  # registered once, offline now
    run = crash_twice_on(cpu_host, started(owner, cpu_host, max_restarts=5))
    place_queued_runs()
    run.refresh_from_db()
    assert (run.status, run.failed_hosts, run.host_faults) == (
        "queued",
        {"cpu-01": 2},
        {"cpu-01": 2},
    )
    assert run.queue_reason == (
        "no online cpu host (cpu-01 failed this run 2 times, cpu-02 is offline)"
    )


def test_a_run_no_host_may_take_again_fails_instead_of_waiting(owner, cpu_host) -> None:
    run = crash_twice_on(cpu_host, started(owner, cpu_host, max_restarts=5))
    assert (run.status, run.exit_cause, run.restarts) == ("failed", "process_exit", 1)
    assert run.exit_reason.endswith("; not restarted: every host that fits failed this run 2 times")
    assert run.failed_hosts == {"cpu-01": 2}


def test_a_single_host_whose_worker_is_lost_keeps_every_restart(owner, cpu_host, settings) -> None:
    # The worker killed (or the platform out of reach) three times: the host did nothing
    # wrong, so the only host there is keeps the run, restart after restart.
    run = started(owner, cpu_host, max_restarts=3)
    silent = timedelta(seconds=settings.NPULAB["RUN_HEARTBEAT_TIMEOUT_S"] + 1)
    for attempt in (1, 2, 3):
        # The run's events stopped long ago; the host itself still heartbeats.
        Run.objects.filter(pk=run.pk).update(last_heartbeat=timezone.now() - silent)
        sweep_runs()
        run.refresh_from_db()
        assert (run.status, run.attempt) == ("queued", attempt + 1)
        assert (run.failed_hosts, run.host_faults) == ({"cpu-01": attempt}, {})
        place_queued_runs()
        run.refresh_from_db()
        assert run.host == cpu_host, run.queue_reason
        run = do_claim_run(cpu_host, run.pk, run.attempt)
    assert (run.status, run.restarts) == ("running", 3)
    assert set(run.attempts.values_list("exit_cause", flat=True)) == {"worker_lost", ""}


def test_the_last_failure_counts_against_its_host_too(owner, cpu_host) -> None:
    run = crash(cpu_host, started(owner, cpu_host, max_restarts=0))
    assert (run.status, run.failed_hosts) == ("failed", {"cpu-01": 1})


def loss(step: int, value: float) -> dict:
    return {"type": "metric", "time": 1.0, "key": "loss", "step": step, "value": value}


def second_attempt(owner, host, first_steps: range) -> Run:
    """A run whose first attempt logged ``first_steps`` and crashed, claimed again."""
    run = started(owner, host, max_restarts=1)
    do_ingest_events(host, run.pk, 1, 0, 10, [loss(step, 1.0) for step in first_steps])
    run = crash(host, run)
    place_queued_runs()
    return do_claim_run(host, run.pk, 2)


def loss_points(run: Run) -> list[tuple[int, int]]:
    """(step, attempt) of the run's loss points."""
    loss = MetricSeries.objects.filter(run=run, key="loss")
    return [(step, attempt) for _, _, step, _, _, attempt in stored_points(loss)]


def test_resume_drops_the_lost_attempts_later_points(owner, cpu_host) -> None:
    run = second_attempt(owner, cpu_host, range(10))
    batch = [
        {"type": "resume", "time": 2.0, "step": 5, "path": "/x"},
        *[loss(step, 0.5) for step in range(6, 12)],
    ]
    do_ingest_events(cpu_host, run.pk, 2, 0, 10, batch)
    assert loss_points(run) == [(s, 1) for s in range(6)] + [(s, 2) for s in range(6, 12)]
    stats = MetricSeries.objects.values_list("key", "points", "last_step")
    assert list(stats.filter(run=run)) == [("loss", 12, 11)]
    assert RunAttempt.objects.get(run=run, number=2).resumed_from_step == 5


def test_an_attempt_without_a_checkpoint_starts_the_curve_over(owner, cpu_host) -> None:
    run = second_attempt(owner, cpu_host, range(30))
    batch = [{"type": "resume", "time": 2.0, "step": None}, *[loss(step, 0.5) for step in range(5)]]
    do_ingest_events(cpu_host, run.pk, 2, 0, 10, batch)
    assert loss_points(run) == [(s, 2) for s in range(5)]
    assert list(MetricSeries.objects.filter(run=run).values_list("points", "last_step")) == [(5, 4)]
    assert RunAttempt.objects.get(run=run, number=2).resumed_from_step is None


# -- checkpoints --------------------------------------------------------------------


def checkpoint_event(step: int, payload: bytes) -> dict:
    return {
        "type": "checkpoint",
        "time": 1.0,
        "step": step,
        "path": f"/work/runs/1/checkpoints/step-{step:012d}",
        "bytes": len(payload),
        "sha256": hashlib.sha256(payload).hexdigest(),
    }


@pytest.fixture
def artifacts(settings, tmp_path):
    settings.NPULAB = dict(settings.NPULAB, ARTIFACT_DIR=str(tmp_path / "artifacts"))
    return tmp_path / "artifacts"


def host_client(host) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {do_issue_host_token(host)}")
    return client


def upload(client: APIClient, run: Run, step: int, payload: bytes):
    return client.put(
        f"/api/v1/agent/runs/{run.pk}/checkpoints/{step}/",
        payload,
        content_type="application/octet-stream",
    )


def test_checkpoints_are_uploaded_kept_pinned_and_resumed_from(
    owner, api, cpu_host, artifacts
) -> None:
    run = started(owner, cpu_host, keep_checkpoints=2, max_restarts=1)
    payloads = {step: f"weights at {step}".encode() * 100 for step in (10, 20, 30)}
    events = [checkpoint_event(step, payload) for step, payload in payloads.items()]
    reply = do_ingest_events(cpu_host, run.pk, 1, 0, 10, events)
    assert reply["pinned"] == []
    assert list(run.checkpoints.values_list("step", "status")) == [
        (30, "on_host"),
        (20, "on_host"),
        (10, "on_host"),
    ]
    worker = host_client(cpu_host)
    assert upload(worker, run, 10, payloads[10]).status_code == 201
    assert api.post(f"/api/v1/runs/{run.pk}/checkpoints/10/pin/").json()["pinned"] is True
    assert upload(worker, run, 20, payloads[20]).status_code == 201
    assert upload(worker, run, 30, payloads[30]).status_code == 201
    # keep 2 newest, plus the pinned one
    assert list(run.checkpoints.values_list("step", "status")) == [
        (30, "stored"),
        (20, "stored"),
        (10, "stored"),
    ]
    api.delete(f"/api/v1/runs/{run.pk}/checkpoints/10/pin/")
    assert run.checkpoints.get(step=10).status == "deleted"
    assert not (artifacts / "runs" / str(run.pk) / "checkpoints" / "10").exists()

    download = api.get(f"/api/v1/runs/{run.pk}/checkpoints/30/download/")
    assert b"".join(download.streaming_content) == payloads[30]
    assert api.get(f"/api/v1/runs/{run.pk}/checkpoints/10/download/").status_code == 404

    run = crash(cpu_host, run)
    place_queued_runs()
    claim = worker.post(f"/api/v1/agent/runs/{run.pk}/claim/", {"attempt": 2}, format="json").json()
    assert claim["resume"] == {
        "step": 30,
        "bytes": len(payloads[30]),
        "sha256": hashlib.sha256(payloads[30]).hexdigest(),
    }
    fetched = worker.get(f"/api/v1/agent/runs/{run.pk}/checkpoints/30/")
    assert b"".join(fetched.streaming_content) == payloads[30]


def test_an_upload_that_does_not_match_is_refused_and_marked(owner, cpu_host, artifacts) -> None:
    run = started(owner, cpu_host)
    do_ingest_events(cpu_host, run.pk, 1, 0, 10, [checkpoint_event(5, b"good bytes")])
    response = upload(host_client(cpu_host), run, 5, b"bad bytes!")
    assert response.status_code == 422
    checkpoint = run.checkpoints.get()
    assert (checkpoint.status, checkpoint.status_reason) == (
        "damaged",
        "upload of 10 bytes does not match the checkpoint's 10 bytes and SHA-256",
    )


def test_only_the_host_that_wrote_a_checkpoint_uploads_it(owner, cpu_host, artifacts) -> None:
    run = started(owner, cpu_host)
    do_ingest_events(cpu_host, run.pk, 1, 0, 10, [checkpoint_event(5, b"x")])
    other = register(HostFactory(name="cpu-02"), "cpu", 1)
    assert upload(host_client(other), run, 5, b"x").status_code == 403
    assert upload(host_client(cpu_host), run, 99, b"x").status_code == 404


def test_a_damaged_report_marks_the_checkpoint(owner, cpu_host) -> None:
    run = started(owner, cpu_host)
    do_ingest_events(
        cpu_host,
        run.pk,
        1,
        0,
        10,
        [
            checkpoint_event(5, b"x"),
            {"type": "checkpoint_damaged", "time": 2.0, "step": 5, "reason": "fails its SHA-256"},
        ],
    )
    assert run.checkpoints.get().status == Checkpoint.Status.DAMAGED


def test_restart_an_ended_run(owner, api, other_api, cpu_host) -> None:
    run = crash(cpu_host, started(owner, cpu_host, max_restarts=0))
    assert run.status == "failed"
    assert other_api.post(f"/api/v1/runs/{run.pk}/restart/").status_code == 403
    body = api.post(f"/api/v1/runs/{run.pk}/restart/").json()
    assert (body["status"], body["attempt"], body["queue_reason"]) == (
        "queued",
        2,
        "restarted by owner as attempt 2",
    )
    again = api.post(f"/api/v1/runs/{run.pk}/restart/")
    assert again.status_code == 409
    assert again.json()["detail"] == (
        f"run {run.pk} is queued; only a failed, cancelled, lost or expired run restarts"
    )
