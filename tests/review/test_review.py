"""The upgrade review's decision, on real snapshots and real runs."""

from __future__ import annotations

import pytest
from django.utils import timezone

from npulab.review.review import CAUTION, GO, NO_GO, review
from npulab.runs.models import Run
from npulab.series.ingest import insert_points
from npulab.series.owners import Owner
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
        "compatible, no error findings, smoke runs succeeded under the target",
        "fewer than 3 runs behind the numbers of smoke: treat their changes as a hint",
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
    assert "training builtin:cnn: loss_last 20% worse under the target" in result.reasons
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


# -- evidence by stack, numbers with their noise, the user's own failures ----------------


def user_ended(snapshot, cause: str, status=Run.Status.FAILED) -> Run:
    return RunFactory(
        snapshot=snapshot,
        status=status,
        finished_at=timezone.now(),
        result={"status": "failed", "summary": {}},
        exit_cause=cause,
        exit_reason="FileNotFoundError: train.py",
    )


def number(result, kind: str, key: str, group: str = "") -> dict:
    return next(
        row
        for row in result.numbers
        if (row["kind"], row["key"], row["group"]) == (kind, key, group)
    )


def test_a_package_change_on_the_same_stack_keeps_the_evidence(
    cpu_host, current, staging, document
) -> None:
    """After a `pip install`, the host's new snapshot still speaks through the old one's runs,
    and a second host with the same stack adds its own."""
    for _ in range(2):
        finished(current)
    finished(staging, gflops=104.0)
    stack = {"torch": "2.1.0", "torch_npu": "2.1.0.post8", "cann": "8.0.RC3"}
    after_pip = do_record_snapshot(cpu_host, document(packages={"requests": "2.99.0"}, **stack))
    assert after_pip.snapshot != current
    twin = HostFactory(name="twin-01")
    finished(do_record_snapshot(twin, document(hostname="twin-01", **stack)).snapshot)

    result = review(after_pip.snapshot, target=staging)

    gflops = number(result, "smoke", "matmul_gflops")
    assert gflops["current"]["n"] == 4
    assert result.evidence["current"]["hosts"] == ["cpu-01", "twin-01"]
    assert result.evidence["current"]["runs"] == 4
    assert {c["name"] for c in result.stack_changes} == {"CANN", "torch", "torch_npu"}
    # requests differs too, beside the stack; the stack's own packages are not repeated.
    assert "requests" in result.other_changes["packages"]["changed"]
    assert "torch-npu" not in result.other_changes["packages"]["changed"]


def test_a_target_with_the_current_stack_shares_its_runs(cpu_host, current, document) -> None:
    stack = {"torch": "2.1.0", "torch_npu": "2.1.0.post8", "cann": "8.0.RC3"}
    host = HostFactory(name="staging-03")
    target = do_record_snapshot(
        host, document(hostname="staging-03", packages={"requests": "2.99.0"}, **stack)
    ).snapshot

    result = review(current, target=target)

    assert result.same_stack
    assert result.stack_changes == []
    assert result.other_changes["packages"]["changed"]["requests"][1] == "2.99.0"
    gflops = number(result, "smoke", "matmul_gflops")
    assert (gflops["current"]["n"], gflops["target"]["n"], gflops["change"]) == (1, 1, 0.0)
    assert result.decision == GO, result.reasons
    assert any("both sides share the same runs" in reason for reason in result.reasons)


def test_numbers_carry_their_noise_and_how_many_runs_stand_behind_them(current, staging) -> None:
    finished(current, gflops=96.0)
    finished(current, gflops=104.0)  # current: 100, 96, 104
    for gflops in (101.0, 103.0):
        finished(staging, gflops=gflops)

    result = review(current, target=staging)

    gflops = number(result, "smoke", "matmul_gflops")
    assert gflops["current"] == {"median": 100.0, "min": 96.0, "max": 104.0, "n": 3}
    assert gflops["target"] == {"median": 102.0, "min": 101.0, "max": 103.0, "n": 2}
    assert gflops["change"] == pytest.approx(0.02)
    assert gflops["few_runs"]  # two runs under the target, three asked for
    assert "fewer than 3 runs behind the numbers of smoke" in result.reasons[-1]


def test_the_minimum_number_of_runs_is_a_setting(settings, current, staging) -> None:
    settings.NPULAB = {**settings.NPULAB, "REVIEW_MIN_RUNS": 1}
    finished(staging)
    result = review(current, target=staging)
    assert not number(result, "smoke", "matmul_gflops")["few_runs"]
    assert result.reasons == [
        "compatible, no error findings, smoke runs succeeded under the target"
    ]


def test_a_change_within_the_noise_is_not_a_regression(current, staging) -> None:
    """15 % slower by the medians, past the 10 % threshold, but the ranges overlap."""
    finished(current, gflops=80.0)
    finished(current, gflops=120.0)  # current: 80, 100, 120
    for gflops in (75.0, 85.0, 110.0):
        finished(staging, gflops=gflops)

    result = review(current, target=staging)

    gflops = number(result, "smoke", "matmul_gflops")
    assert gflops["change"] == pytest.approx(-0.15)
    assert (gflops["past_threshold"], gflops["within_noise"], gflops["regression"]) == (
        True,
        True,
        False,
    )
    assert result.decision == GO, result.reasons


def test_a_change_outside_the_noise_is_a_regression(current, staging) -> None:
    finished(current, gflops=98.0)
    finished(current, gflops=102.0)
    for gflops in (80.0, 82.0, 85.0):
        finished(staging, gflops=gflops)

    result = review(current, target=staging)

    assert number(result, "smoke", "matmul_gflops")["regression"]
    assert result.decision == CAUTION
    assert "smoke matmul_gflops 18% worse under the target" in result.reasons


def test_job_errors_are_listed_apart_and_never_a_reason(current, staging) -> None:
    finished(staging)
    job_error = user_ended(staging, exits.JOB_ERROR)  # the newest run under the target
    refused = user_ended(staging, exits.SPEC_INVALID)
    cancelled = user_ended(current, exits.CANCELLED, status=Run.Status.CANCELLED)

    result = review(current, target=staging)

    assert result.decision == GO, result.reasons
    assert [run["id"] for run in result.job_errors["target"]] == [refused.pk, job_error.pk]
    assert result.job_errors["target"][1]["cause_label"] == "Job error"
    assert [run["id"] for run in result.job_errors["current"]] == [cancelled.pk]
    smoke = result.outcomes[0]
    assert (smoke["target"]["runs"], smoke["target"]["failed"], smoke["target"]["job_errors"]) == (
        1,
        0,
        2,
    )
    assert not any("failed" in reason for reason in result.reasons)


def test_an_environment_failure_still_counts(current, staging) -> None:
    finished(staging)
    user_ended(staging, exits.JOB_ERROR)
    failed = finished(staging, status=Run.Status.FAILED)
    result = review(current, target=staging)
    assert result.decision == NO_GO
    assert f"the last smoke run under the target failed (run #{failed.pk})" in result.reasons


def test_an_unknown_planned_version_says_so_with_the_nearest_known(current) -> None:
    result = review(current, planned={"cann": "8.4.RC1", "torch_npu": "2.6.0"})
    # The table also rules 8.4.RC1 out for torch_npu 2.6.0; the unknown version comes first.

    assert result.unknown_versions == [
        {
            "field": "cann",
            "label": "CANN",
            "version": "8.4.RC1",
            "nearest": ["8.2.RC1", "8.3.RC1", "8.5.0", "9.0.0"],
        }
    ]
    assert result.reasons[0] == (
        "CANN 8.4.RC1 is an unknown version: no compatibility source knows it "
        "(nearest known: 8.2.RC1, 8.3.RC1, 8.5.0, 9.0.0)"
    )
    assert result.decision == NO_GO
    plan = review(current, planned={"torch_npu": "2.1.0.post99"})
    assert plan.decision == CAUTION
    assert plan.reasons[0].startswith("torch_npu 2.1.0.post99 is an unknown version")


def test_a_typo_in_a_planned_version_is_unknown_too(current) -> None:
    result = review(current, planned={"torch_npu": "2.6.0.post99", "python": "3.99"})
    unknown = {item["field"]: item for item in result.unknown_versions}
    assert unknown["torch_npu"]["nearest"][:2] == ["2.6.0.post3", "2.6.0.post5"]
    assert unknown["python"]["nearest"][-1] == "3.14"
    assert review(current, planned={"cann": "8.3.RC1"}).unknown_versions == []


def test_planning_the_current_versions_reviews_the_current_stack(current) -> None:
    """A plan may name what is installed: its evidence and checks are the current ones."""
    result = review(
        current, planned={"cann": "8.0.RC3", "torch_npu": "2.1.0.post8", "torch": "2.1.0"}
    )
    assert result.unknown_versions == []
    assert result.same_stack
    assert "driver" not in result.compatibility  # the installed driver was checked
    assert number(result, "smoke", "matmul_gflops")["target"]["n"] == 1


def test_a_planned_stack_takes_the_runs_of_a_host_that_has_it(current, staging) -> None:
    finished(staging, gflops=104.0)
    result = review(current, planned={"cann": "8.1.RC1", "torch_npu": "2.5.1"})
    assert result.target_stack["torch"] == "2.5.1"
    assert result.evidence["target"]["hosts"] == ["staging-01"]
    assert number(result, "smoke", "matmul_gflops")["target"]["median"] == 104.0


# -- training: like with like, throughput and time to a loss threshold -----------------


def trained(snapshot, args: list[str], losses: list[float], rate: float) -> Run:
    """A succeeded builtin:cnn run whose loss series took one second a step."""
    run = RunFactory(
        spec=validate(
            {"kind": "training", "device_type": "cpu", "entry": "builtin:cnn", "args": args}
        ),
        snapshot=snapshot,
        status=Run.Status.SUCCEEDED,
        finished_at=timezone.now(),
        result={"status": "succeeded", "summary": {"loss_last": losses[-1]}},
        exit_cause=exits.COMPLETED,
    )
    start = 1_700_000_000.0
    insert_points(
        Owner.of_run(run.pk),
        {
            "loss": [(step, loss, start + step) for step, loss in enumerate(losses)],
            "samples_per_s": [(step, rate, start + step) for step in range(len(losses))],
        },
        attempt=1,
    )
    return run


def test_training_compares_the_same_job_by_throughput_loss_and_time_to_a_threshold(
    current, staging
) -> None:
    trained(current, ["--lr", "0.01"], [2.0, 1.0, 0.6, 0.5], rate=400.0)
    trained(staging, ["--lr", "0.01"], [2.0, 1.5, 1.0, 0.7, 0.55], rate=300.0)
    trained(staging, ["--lr", "0.1"], [2.0, 0.2], rate=900.0)  # another job: apart

    result = review(current, target=staging)

    group = "builtin:cnn --lr 0.01"
    throughput = number(result, "training", "samples_per_s", group)
    assert (throughput["current"]["median"], throughput["target"]["median"]) == (400.0, 300.0)
    assert throughput["regression"]
    # The threshold is the highest final loss of the job's runs: 0.55, reached by both.
    reach = number(result, "training", "seconds_to_loss≤0.55", group)
    assert (reach["current"]["median"], reach["target"]["median"]) == (3.0, 4.0)
    assert reach["lower_is_better"]
    assert reach["regression"]
    assert number(result, "training", "loss_last", group)["change"] == pytest.approx(0.1)
    other = number(result, "training", "loss_last", "builtin:cnn --lr 0.1")
    assert (other["current"], other["target"]["n"], other["change"]) == (None, 1, None)


def test_a_failure_diagnosed_as_the_users_code_never_counts_against_the_stack(
    current, staging
) -> None:
    finished(staging)
    # A process exit whose diagnosis blames the user's code (an uncaught exception in train.py).
    blamed = user_ended(staging, exits.PROCESS_EXIT)
    blamed.diagnosis = {"category": "user-code", "blame": "user-code", "codes": []}
    blamed.save()
    result = review(current, target=staging)
    assert result.decision == GO, result.reasons
    assert [run["id"] for run in result.job_errors["target"]] == [blamed.pk]
    # The same failure blamed on the stack does count.
    blamed.diagnosis = {"category": "aicore-exec", "blame": "stack", "codes": ["507035"]}
    blamed.save()
    assert review(current, target=staging).decision == NO_GO
