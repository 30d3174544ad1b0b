from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from npulab.hosts.models import Host
from npulab.hosts.services import sweep_hosts
from npulab.runs.models import DeviceLease, Run, RunAttempt, RunEvent
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import (
    NO_HOST_HINT,
    Conflict,
    SubmissionInvalid,
    do_cancel_run,
    do_claim_run,
    do_finish_run,
    do_ingest_events,
    do_mark_run_lost,
    do_reconcile_host_runs,
    do_submit_run,
    sweep_runs,
)
from npulab.series.rollups import LOWEST_STEP
from tests.conftest import register
from tests.factories import HostFactory
from tests.series.blocks import expected_blocks, stored_blocks, stored_points

pytestmark = pytest.mark.django_db


def running_run(owner: object, host: Host, **spec: object) -> Run:
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu", **spec})
    place_queued_runs()
    return do_claim_run(host, run.pk, 1)


def log(line: str, stream: str = "stdout") -> dict:
    return {"type": "log", "time": 1.0, "stream": stream, "line": line}


# -- submission ---------------------------------------------------------


def test_submission_errors_name_spec_and_queueing_fields_together(owner) -> None:
    with pytest.raises(SubmissionInvalid) as caught:
        do_submit_run(
            owner,
            {
                "kind": "smoke",
                "device_type": "cpu",
                "devices": -1,
                "priority": "high",
                "host": "nope",
            },
        )
    assert caught.value.errors == {
        "devices": "must be at least 1",
        "priority": "must be an integer from -1000 to 1000",
        "host": "no host named 'nope'; there are no hosts yet" + NO_HOST_HINT,
    }
    assert Run.objects.count() == 0


def test_submission_keeps_name_tags_and_priority(owner, cpu_host) -> None:
    run = do_submit_run(
        owner,
        {
            "kind": "smoke",
            "device_type": "cpu",
            "name": " nightly ",
            "tags": ["ci", "ci", "cann-8.1"],
            "priority": 5,
            "host": "cpu-01",
        },
    )
    assert (run.name, run.tags, run.priority, run.requested_host) == (
        "nightly",
        ["ci", "cann-8.1"],
        5,
        "cpu-01",
    )
    assert run.spec["train_steps"] == 50
    assert run.submitted_by == owner


@pytest.mark.parametrize("bad", [["x" * 65], "ci", [""], [1]])
def test_tags_must_be_short_strings(owner, bad: object) -> None:
    with pytest.raises(SubmissionInvalid) as caught:
        do_submit_run(owner, {"kind": "smoke", "device_type": "cpu", "tags": bad})
    assert "tags" in caught.value.errors


# -- claim and events -------------------------------------------------------


def test_claim_starts_the_run_once(owner, cpu_host) -> None:
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu"})
    place_queued_runs()
    claimed = do_claim_run(cpu_host, run.pk, 1)
    assert claimed.status == Run.Status.RUNNING
    with pytest.raises(Conflict, match="is running, not dispatched"):
        do_claim_run(cpu_host, run.pk, 1)


def test_a_host_cannot_claim_another_hosts_run(owner, cpu_host) -> None:
    other = register(HostFactory(name="cpu-02"), "cpu", 1)
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu", "host": "cpu-01"})
    place_queued_runs()
    with pytest.raises(PermissionDenied):
        do_claim_run(other, run.pk, 1)


def test_a_stale_attempt_is_refused(owner, cpu_host) -> None:
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu"})
    place_queued_runs()
    with pytest.raises(Conflict, match=r"attempt 2 of run \d+ is stale"):
        do_claim_run(cpu_host, run.pk, 2)


def test_events_are_stored_once_in_order(owner, cpu_host) -> None:
    run = running_run(owner, cpu_host)
    batch = [
        log("a"),
        {"type": "metric", "time": 2.0, "key": "train/loss", "step": 0, "value": 2.5},
        {"type": "heartbeat", "time": 2.5},
        {"type": "step", "time": 3.0, "name": "device", "status": "pass", "seconds": 0.1},
    ]
    # A smoke run: without the checkpoints capability its replies carry no pinned steps.
    assert do_ingest_events(cpu_host, run.pk, 1, 0, 100, batch) == {"ack": 100, "cancel": False}
    # The same batch again (its reply was lost): acknowledged, not stored twice.
    assert do_ingest_events(cpu_host, run.pk, 1, 0, 100, batch) == {"ack": 100, "cancel": False}
    assert list(RunEvent.objects.filter(run=run).values_list("type", flat=True)) == ["log", "step"]
    assert [
        (key, step, value, time)
        for key, _, step, value, time, _ in stored_points(run.metric_series.all())
    ] == [("train/loss", 0, 2.5, 2.0)]
    run.refresh_from_db()
    assert run.events_offset == 100


def test_a_batch_that_skips_ahead_is_refused_with_the_offset_to_resend(owner, cpu_host) -> None:
    run = running_run(owner, cpu_host)
    do_ingest_events(cpu_host, run.pk, 1, 0, 50, [log("a")])
    with pytest.raises(Conflict) as caught:
        do_ingest_events(cpu_host, run.pk, 1, 80, 120, [log("c")])
    assert caught.value.extra == {"expected_start": 50}
    assert RunEvent.objects.filter(run=run).count() == 1


def test_malformed_events_are_kept_as_text_not_dropped(owner, cpu_host) -> None:
    run = running_run(owner, cpu_host)
    do_ingest_events(
        cpu_host,
        run.pk,
        1,
        0,
        10,
        [
            "just a string",
            {"type": "metric", "key": "loss", "step": "one", "value": 1},
            {"type": "metric", "key": "loss", "step": 1, "value": None, "nonfinite": "nan"},
        ],
    )
    lines = [event.data["line"] for event in RunEvent.objects.filter(run=run)]
    assert lines[0].startswith("malformed event (no valid type) stored as text:")
    assert lines[1].startswith("malformed event (a metric needs key, integer step and value)")
    assert [point[2:4] for point in stored_points(run.metric_series.all())] == [(1, None)]


@pytest.mark.parametrize("value", [1.0, 1])
def test_a_step_whose_block_no_integer_can_start_is_an_ingest_error(owner, cpu_host, value) -> None:
    # The coarsest rollup block of a step within 10,000 of -2**63 would start below it.
    run = running_run(owner, cpu_host)
    bad = {"type": "metric", "key": "loss", "step": -(2**63), "value": value, "time": 1.0}
    low = {"type": "metric", "key": "loss", "step": LOWEST_STEP, "value": 2.0, "time": 1.0}
    do_ingest_events(cpu_host, run.pk, 1, 0, 2, [bad, low])
    lines = [event.data["line"] for event in RunEvent.objects.filter(run=run)]
    assert len(lines) == 1
    assert lines[0].startswith("malformed event (a metric needs key, integer step and value)")
    assert [point[2:4] for point in stored_points(run.metric_series.all())] == [(LOWEST_STEP, 2.0)]
    assert stored_blocks(run.metric_series.all()) == expected_blocks(run.metric_series.all())


@pytest.mark.parametrize("key", ["loss\x00", "loss\udcff", "loss\n"])
@pytest.mark.parametrize("value", [1.0, 1])
def test_a_metric_key_no_database_can_store_is_an_ingest_error(owner, cpu_host, key, value) -> None:
    # Both ways a point is read (a float value and time; anything else) check the key.
    run = running_run(owner, cpu_host)
    bad = {"type": "metric", "key": key, "step": 1, "value": value, "time": 1.0}
    good = {"type": "metric", "key": "loss", "step": 1, "value": 2.0, "time": 1.0}
    do_ingest_events(cpu_host, run.pk, 1, 0, 2, [bad, good])
    lines = [event.data["line"] for event in RunEvent.objects.filter(run=run)]
    assert len(lines) == 1
    assert lines[0].startswith("malformed event")
    assert [point[2:4] for point in stored_points(run.metric_series.all())] == [(1, 2.0)]


def test_a_hostile_step_started_line_is_stored_cut_and_clean(owner, cpu_host) -> None:
    # A user's script can append this line to events.jsonl itself.
    run = running_run(owner, cpu_host)
    name = "step\x00\udcff" + "x" * 10_000
    started = {"type": "step_started", "time": 1.0, "name": name}
    do_ingest_events(cpu_host, run.pk, 1, 0, 10, [started])
    current = RunAttempt.objects.get(run=run, number=1).current_step
    assert current.startswith("step\ufffd")
    assert len(current) == RunAttempt._meta.get_field("current_step").max_length


def test_secrets_from_the_spec_never_reach_the_stored_log(owner, cpu_host) -> None:
    run = running_run(owner, cpu_host, env={"HF_TOKEN": "hf_abcdefgh", "MODE": "fast-mode"})
    do_ingest_events(
        cpu_host,
        run.pk,
        1,
        0,
        10,
        [log("token is hf_abcdefgh, mode fast-mode"), log("key npl_" + "x" * 30)],
    )
    lines = [event.data["line"] for event in RunEvent.objects.filter(run=run)]
    assert lines == ["token is <redacted>, mode fast-mode", "key <redacted>"]
    assert run.display_spec["env"] == {"HF_TOKEN": "<redacted>", "MODE": "fast-mode"}


# -- finishing ---------------------------------------------------------------


def finish_with_result(owner, host, result: dict | None, exit_code: int) -> Run:
    run = running_run(owner, host)
    events = [dict(result, type="result", time=5.0)] if result else []
    do_ingest_events(host, run.pk, 1, 0, 10, events)
    return do_finish_run(host, run.pk, 1, {"exit_code": exit_code, "exited_at": 1.7e9})


def test_success_needs_a_succeeded_result_and_exit_code_0(owner, cpu_host) -> None:
    run = finish_with_result(owner, cpu_host, {"status": "succeeded", "reason": "ok"}, 0)
    assert (run.status, run.exit_cause, run.exit_reason) == ("succeeded", "completed", "ok")
    assert DeviceLease.objects.count() == 0
    assert run.exited_at is not None


def test_a_failed_result_keeps_the_runners_cause(owner, cpu_host) -> None:
    result = {"status": "failed", "reason": "timed out after 5 s", "cause": "timeout"}
    run = finish_with_result(owner, cpu_host, result, 1)
    assert (run.status, run.exit_cause, run.exit_reason) == (
        "failed",
        "timeout",
        "timed out after 5 s",
    )


def test_no_result_means_the_process_died(owner, cpu_host) -> None:
    run = finish_with_result(owner, cpu_host, None, -9)
    assert (run.status, run.exit_cause) == ("failed", "process_exit")
    assert run.exit_reason == "the runner exited with code -9 and no result"


def test_success_with_a_nonzero_exit_is_a_failure(owner, cpu_host) -> None:
    run = finish_with_result(owner, cpu_host, {"status": "succeeded"}, 3)
    assert run.status == "failed"
    assert run.exit_reason == "the runner reported success but exited with code 3"


def test_a_repeated_finish_report_changes_nothing(owner, cpu_host) -> None:
    run = finish_with_result(owner, cpu_host, {"status": "succeeded"}, 0)
    again = do_finish_run(cpu_host, run.pk, 1, {"exit_code": 1})
    assert again.status == "succeeded"


# -- cancel ---------------------------------------------------------------------


def test_cancel_of_a_queued_run_is_immediate(owner, cpu_host) -> None:
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu"})
    run = do_cancel_run(run.pk, owner)
    assert (run.status, run.exit_cause, run.exit_reason) == (
        "cancelled",
        "cancelled",
        "cancelled by owner",
    )


def test_cancel_of_a_dispatched_run_frees_its_devices(owner, cpu_host) -> None:
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu"})
    place_queued_runs()
    do_cancel_run(run.pk, owner)
    assert DeviceLease.objects.count() == 0
    with pytest.raises(Conflict, match="is cancelled, not dispatched"):
        do_claim_run(cpu_host, run.pk, 1)


def test_cancel_of_a_running_run_waits_for_the_host(owner, cpu_host) -> None:
    run = running_run(owner, cpu_host)
    run = do_cancel_run(run.pk, owner)
    assert (run.status, run.cancel_requested) == ("running", True)
    assert do_ingest_events(cpu_host, run.pk, 1, 0, 0, [])["cancel"] is True
    run = do_finish_run(cpu_host, run.pk, 1, {"exit_code": -15, "stop_reason": "cancel requested"})
    assert (run.status, run.exit_reason) == ("cancelled", "cancelled by owner")


def test_a_finished_run_cannot_be_cancelled(owner, cpu_host) -> None:
    run = finish_with_result(owner, cpu_host, {"status": "succeeded"}, 0)
    with pytest.raises(Conflict, match="already succeeded"):
        do_cancel_run(run.pk, owner)


# -- the sweeper ------------------------------------------------------------------


def test_an_unclaimed_run_goes_back_to_the_queue(owner, cpu_host, settings) -> None:
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu"})
    place_queued_runs()
    later = timezone.now() + timedelta(seconds=settings.NPULAB["DISPATCH_TIMEOUT_S"] + 1)
    assert sweep_runs(later) == {"requeued": 1, "lost": 0, "expired": 0}
    run.refresh_from_db()
    assert (run.status, run.host, run.device_indices) == ("queued", None, [])
    assert run.queue_reason.startswith("host cpu-01 did not claim the run within")
    assert DeviceLease.objects.count() == 0


def test_a_run_dispatched_to_a_host_that_went_offline_is_requeued_without_the_timeout(
    owner, cpu_host, settings
) -> None:
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu"})
    place_queued_runs()
    soon = timezone.now() + timedelta(seconds=1)
    # Still online: the dispatch waits for its claim.
    assert sweep_runs(soon)["requeued"] == 0
    # The host sweep finds its heartbeat stale: the worker died with the run in its queue.
    later = timezone.now() + timedelta(seconds=settings.NPULAB["HOST_HEARTBEAT_TIMEOUT_S"] + 1)
    assert sweep_hosts(later) == 1
    # Not right after an outage of the platform's own: every host was silenced by it.
    assert sweep_runs(later, heard_since=later - timedelta(seconds=1))["requeued"] == 0
    assert sweep_runs(later, heard_since=soon - timedelta(seconds=3600)) == {
        "requeued": 1,
        "lost": 0,
        "expired": 0,
    }
    run.refresh_from_db()
    assert (run.status, run.host, run.device_indices) == ("queued", None, [])
    assert run.queue_reason == "host cpu-01 went offline before it claimed the run; requeued"
    assert DeviceLease.objects.count() == 0


def test_a_silent_running_run_is_lost(owner, cpu_host, settings) -> None:
    run = running_run(owner, cpu_host)
    later = timezone.now() + timedelta(seconds=settings.NPULAB["RUN_HEARTBEAT_TIMEOUT_S"] + 1)
    assert sweep_runs(later) == {"requeued": 0, "lost": 1, "expired": 0}
    run.refresh_from_db()
    assert (run.status, run.exit_cause) == ("lost", "worker_lost")
    assert run.infrastructure_failure
    assert DeviceLease.objects.count() == 0


def test_events_keep_a_run_alive(owner, cpu_host, settings) -> None:
    run = running_run(owner, cpu_host)
    do_ingest_events(cpu_host, run.pk, 1, 0, 0, [])
    assert sweep_runs(timezone.now()) == {"requeued": 0, "lost": 0, "expired": 0}


def test_the_host_heartbeat_keeps_the_runs_it_lists_alive(owner, cpu_host, settings) -> None:
    run = running_run(owner, cpu_host)
    silent_s = settings.NPULAB["RUN_HEARTBEAT_TIMEOUT_S"]
    # No event batch for a while (the worker uploads the last checkpoints), but it beats.
    do_reconcile_host_runs(cpu_host, [run.pk], timezone.now() + timedelta(seconds=silent_s))
    assert sweep_runs(timezone.now() + timedelta(seconds=silent_s + 1)) == {
        "requeued": 0,
        "lost": 0,
        "expired": 0,
    }
    assert sweep_runs(timezone.now() + timedelta(seconds=2 * silent_s + 1))["lost"] == 1


def test_runs_the_worker_no_longer_lists_are_lost_after_the_grace(
    owner, cpu_host, settings
) -> None:
    run = running_run(owner, cpu_host)
    assert do_reconcile_host_runs(cpu_host, [], timezone.now()) == 0  # just claimed
    later = timezone.now() + timedelta(seconds=settings.NPULAB["RUN_CLAIM_GRACE_S"] + 1)
    assert do_reconcile_host_runs(cpu_host, [run.pk], later) == 0
    assert do_reconcile_host_runs(cpu_host, [], later) == 1
    run.refresh_from_db()
    assert (run.status, run.exit_cause) == ("lost", "worker_lost")
    assert run.exit_reason == "the host worker on cpu-01 is no longer running it (it restarted)"


def test_a_restarted_attempt_has_its_own_grace(owner, cpu_host, settings) -> None:
    grace = timedelta(seconds=settings.NPULAB["RUN_CLAIM_GRACE_S"] + 1)
    run = running_run(owner, cpu_host, kind="training", entry="builtin:cnn", max_restarts=2)
    # It trained for an hour before its machine died.
    Run.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(hours=1))
    assert do_mark_run_lost(run.pk, timezone.now(), "the machine died") == 1
    place_queued_runs()
    run = do_claim_run(cpu_host, run.pk, 2)
    # The run started long before, its second attempt a moment ago: a heartbeat the worker
    # sent before it listed the new attempt loses nothing.
    assert do_reconcile_host_runs(cpu_host, [], timezone.now()) == 0
    run.refresh_from_db()
    assert (run.status, run.attempt) == ("running", 2)
    assert do_reconcile_host_runs(cpu_host, [], timezone.now() + grace) == 1
