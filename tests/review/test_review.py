"""The upgrade review's decision, on real snapshots and real runs."""

from __future__ import annotations

import pytest
from django.utils import timezone

from npulab.review.review import CAUTION, GO, NO_GO, review
from npulab.runs.models import Run
from npulab.snapshots.services import do_record_snapshot
from tests.factories import HostFactory, RunFactory
from workers.contract import exits
from workers.contract.kinds import validate

pytestmark = pytest.mark.django_db


def finished(snapshot, status=Run.Status.SUCCEEDED, gflops=100.0, **extra) -> Run:
    summary = {"matmul_gflops": gflops, "steps_per_s": 50.0, **extra}
    return RunFactory(
        snapshot=snapshot,
        status=status,
        finished_at=timezone.now(),
        result={"status": "succeeded" if status == "succeeded" else "failed", "summary": summary},
        exit_cause=exits.COMPLETED if status == "succeeded" else exits.PROCESS_EXIT,
    )


@pytest.fixture
def current(cpu_host, document):
    snapshot = do_record_snapshot(
        cpu_host, document(torch="2.1.0", torch_npu="2.1.0.post8", cann="8.0.RC3")
    ).snapshot
    finished(snapshot)
    return snapshot


@pytest.fixture
def staging(document):
    host = HostFactory(name="staging-01")
    return do_record_snapshot(
        host, document(torch="2.5.1", torch_npu="2.5.1", cann="8.1.RC1", hostname="staging-01")
    ).snapshot


def test_go_when_compatible_and_proven_by_a_run(current, staging) -> None:
    finished(staging, gflops=104.0)
    result = review(current, target=staging)
    assert result.decision == GO, result.reasons
    assert result.reasons == [
        "compatible, no error findings, smoke runs succeeded under the target"
    ]
    smoke = result.outcomes[0]
    gflops = next(d for d in smoke["deltas"] if d["key"] == "matmul_gflops")
    assert (gflops["current"], gflops["target"], round(gflops["change"], 2)) == (100.0, 104.0, 0.04)


def test_caution_without_runs_under_the_target(current, staging) -> None:
    result = review(current, target=staging)
    assert result.decision == CAUTION
    assert any("no run has succeeded under the target yet" in r for r in result.reasons)
    assert {c["name"] for c in result.changes["versions"]} >= {"CANN", "torch", "torch_npu"}


def test_a_slower_target_is_flagged(current, staging) -> None:
    finished(staging, gflops=70.0)
    result = review(current, target=staging)
    assert result.decision == CAUTION
    assert "smoke matmul_gflops 30% worse under the target" in result.reasons


def test_no_go_when_the_last_run_under_the_target_failed(current, staging) -> None:
    finished(staging)
    finished(staging, status=Run.Status.FAILED)
    result = review(current, target=staging)
    assert result.decision == NO_GO
    assert any(r.startswith("the last smoke run under the target failed") for r in result.reasons)


def test_no_go_when_the_target_is_incompatible(current, document) -> None:
    host = HostFactory(name="staging-02")
    target = do_record_snapshot(
        host, document(torch="2.4.0", torch_npu="2.1.0.post8", hostname="staging-02")
    ).snapshot
    finished(target)
    result = review(current, target=target)
    assert result.decision == NO_GO
    assert "torch_npu 2.1.0.post8 is released for torch 2.1.0, not 2.4.0" in result.reasons[0]


def test_a_planned_version_set_says_what_it_needs(current) -> None:
    result = review(current, planned={"cann": "8.3.RC1", "torch_npu": "2.6.0"})
    assert result.decision == CAUTION
    target = result.compatibility["target"]
    assert (target["cann"], target["torch_npu"], target["torch"]) == (
        "8.3.RC1",
        "2.6.0.post3",
        "2.6.0",
    )
    assert {row["torch"] for row in result.compatibility["required"]} == {"2.6.0"}
    assert result.compatibility["driver"]["verdict"] == "unknown"
    assert any("a planned target has no runs" in r for r in result.reasons)


def test_a_plan_the_table_rules_out_is_no_go(current) -> None:
    result = review(current, planned={"cann": "8.0.RC3", "torch_npu": "2.6.0", "python": "3.8"})
    assert result.decision == NO_GO


def test_the_kinds_say_which_numbers_count_and_which_way_is_better(current, staging) -> None:
    """Training's final loss is a headline where lower is better; smoke's device count is none."""

    def trained(snapshot, loss_last: float) -> Run:
        return RunFactory(
            spec=validate({"kind": "training", "device_type": "cpu", "entry": "builtin:cnn"}),
            snapshot=snapshot,
            status=Run.Status.SUCCEEDED,
            finished_at=timezone.now(),
            result={"status": "succeeded", "summary": {"loss_last": loss_last, "exit_code": 0}},
            exit_cause=exits.COMPLETED,
        )

    trained(current, 0.50)
    trained(staging, 0.60)
    finished(staging, device_count=8)
    result = review(current, target=staging)
    rows = {row["kind"]: row for row in result.outcomes}
    training = {delta["key"]: delta for delta in rows["training"]["deltas"]}
    assert list(training) == ["loss_last"]
    assert training["loss_last"]["worse"]
    assert "training loss_last 20% worse under the target" in result.reasons
    assert "device_count" not in rows["smoke"]["target"]["numbers"]


def test_coverage_regressions_between_the_stacks_are_a_reason_for_caution(current, staging) -> None:
    from tests.coverage.builders import with_results

    finished(staging, gflops=104.0)
    cells = {("add", "float32"): "pass", ("add", "bfloat16"): "pass"}
    with_results(cells, snapshot=current, result={"status": "succeeded", "summary": {"pass": 2}})
    with_results(
        {**cells, ("add", "bfloat16"): "crash"},
        snapshot=staging,
        result={"status": "succeeded", "summary": {"pass": 1}},
    )
    result = review(current, target=staging)
    coverage = next(row for row in result.outcomes if row["kind"] == "coverage")
    deltas = {delta["key"]: delta for delta in coverage["deltas"]}
    assert (deltas["pass"]["current"], deltas["pass"]["target"]) == (2.0, 1.0)
    assert (deltas["op_regressions"]["target"], deltas["op_regressions"]["worse"]) == (1, True)
    assert (deltas["op_fixes"]["target"], deltas["op_fixes"]["worse"]) == (0, False)
    assert result.decision == CAUTION
    assert "coverage op_regressions: 0 → 1 under the target" in result.reasons
    assert "coverage pass 50% worse under the target" in result.reasons
