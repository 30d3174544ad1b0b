"""Checkpoints are a capability: the generic run code calls its hooks only for the runs of
kinds that declare it (training), and knows nothing else of it."""

from __future__ import annotations

import pytest

from npulab.checkpoints.models import Checkpoint
from npulab.runs import capabilities
from npulab.runs.models import RunEvent
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import do_claim_run, do_ingest_events, do_submit_run
from workers.contract import kinds
from workers.contract.capabilities import CHECKPOINTS, PINNED, RESUME_POINT

pytestmark = pytest.mark.django_db
TRAINING = {"kind": "training", "device_type": "cpu", "entry": "builtin:cnn"}
SMOKE = {"kind": "smoke", "device_type": "cpu"}
GOOD = {"type": "checkpoint", "time": 1.0, "step": 5, "bytes": 10, "sha256": "ab" * 32}


def running(owner, host, spec: dict):
    run = do_submit_run(owner, spec)
    place_queued_runs()
    run.refresh_from_db()
    return do_claim_run(host, run.pk, run.attempt)


def test_training_declares_checkpoints_and_smoke_does_not() -> None:
    assert kinds.get("training").can(CHECKPOINTS)
    assert not kinds.get("smoke").can(CHECKPOINTS)
    assert CHECKPOINTS in [c.name for c in capabilities.of_kind("training")]
    assert CHECKPOINTS not in [c.name for c in capabilities.of_kind("smoke")]


def test_only_a_run_with_checkpoints_hears_of_pins(owner, cpu_host) -> None:
    training = running(owner, cpu_host, TRAINING)
    assert do_ingest_events(cpu_host, training.pk, 1, 0, 10, [GOOD]) == {
        "ack": 10,
        "cancel": False,
        PINNED: [],
    }


def test_a_smoke_runs_checkpoint_line_is_an_ingest_error(owner, cpu_host) -> None:
    smoke = running(owner, cpu_host, SMOKE)
    do_ingest_events(cpu_host, smoke.pk, 1, 0, 10, [GOOD])
    assert not Checkpoint.objects.filter(run=smoke).exists()
    [line] = [e.data["line"] for e in RunEvent.objects.filter(run=smoke, type="log")]
    assert "checkpoint events belong to runs of kinds with the checkpoints capability" in line


@pytest.mark.parametrize(("spec", "resume"), [(TRAINING, True), (SMOKE, False)])
def test_the_claim_reply_names_a_resume_point_only_for_checkpointing_kinds(
    owner, host_api, spec, resume
) -> None:
    run = do_submit_run(owner, spec)
    place_queued_runs()
    reply = host_api.post(f"/api/v1/agent/runs/{run.pk}/claim/", {"attempt": 1}).json()
    assert (RESUME_POINT in reply) is resume
    assert reply.get(RESUME_POINT) is None


def test_checkpoint_lines_no_checkpoint_could_have_are_ingest_errors(owner, cpu_host) -> None:
    run = running(owner, cpu_host, TRAINING)
    do_ingest_events(
        cpu_host,
        run.pk,
        1,
        0,
        10,
        [
            {**GOOD, "step": -1},
            {**GOOD, "step": 2**70},
            {**GOOD, "bytes": -10},
            {**GOOD, "sha256": "not a digest"},
            GOOD,
        ],
    )
    assert list(Checkpoint.objects.filter(run=run).values_list("step", flat=True)) == [5]
    problems = [event.data["line"] for event in RunEvent.objects.filter(run=run, type="log")]
    assert [line.split(" stored as text")[0] for line in problems] == [
        "malformed event (checkpoint.step must be 0 to 9223372036854775807)",
        "malformed event (checkpoint.step must be 0 to 9223372036854775807)",
        "malformed event (checkpoint.bytes must be a size in bytes)",
        "malformed event (checkpoint.sha256 must be 64 hexadecimal digits)",
    ]


def test_the_kinds_api_lists_each_kinds_capabilities(api) -> None:
    assert api.get("/api/v1/kinds/training/").json()["capabilities"] == [
        "checkpoints",
        "profiling",
    ]
    smoke = api.get("/api/v1/kinds/smoke/").json()
    assert smoke["capabilities"] == ["profiling"]
    # The profiling capability brings its field to the kinds that declare it.
    assert "profile" in [field["name"] for field in smoke["fields"]]
