"""GET /api/v1/runs/compare/: a candidate against a baseline, what CI gates on."""

from __future__ import annotations

import pytest
from django.utils import timezone

from npulab.runs.models import Run
from tests.factories import RunFactory
from workers.contract import exits
from workers.contract.kinds import validate

pytestmark = pytest.mark.django_db
COMPARE = "/api/v1/runs/compare/"


def finished(status: str = Run.Status.SUCCEEDED, kind: str = "smoke", **summary: float) -> Run:
    spec = {"kind": kind, "device_type": "cpu"}
    if kind == "training":
        spec["entry"] = "builtin:cnn"
    return RunFactory(
        spec=validate(spec),
        status=status,
        finished_at=timezone.now(),
        result={"status": status, "summary": summary},
        exit_cause=exits.COMPLETED if status == Run.Status.SUCCEEDED else exits.PROCESS_EXIT,
    )


def compare(api, baseline: Run, candidate: Run, **query: object) -> dict:
    response = api.get(COMPARE, {"baseline": baseline.pk, "candidate": candidate.pk, **query})
    assert response.status_code == 200, response.content
    return response.json()


def rows(body: dict) -> dict[str, dict]:
    return {row["name"]: row for row in body["comparisons"]}


def test_a_slower_smoke_run_is_a_regression_beyond_the_threshold(api) -> None:
    baseline = finished(matmul_gflops=100.0, steps_per_s=50.0, device_count=1)
    candidate = finished(matmul_gflops=90.0, steps_per_s=49.0, device_count=8)

    body = compare(api, baseline, candidate)

    assert (body["kind"], body["threshold"], body["regressions"]) == ("smoke", 0.05, 1)
    found = rows(body)
    # device_count is not a headline of the smoke kind.
    assert set(found) == {"status", "matmul_gflops", "steps_per_s"}
    assert found["matmul_gflops"]["regression"]
    assert found["matmul_gflops"]["change"] == pytest.approx(-0.1)
    assert not found["steps_per_s"]["regression"]
    assert compare(api, baseline, candidate, threshold=0.2)["regressions"] == 0


def test_a_higher_final_loss_is_a_regression_of_a_training_run(api) -> None:
    baseline = finished(kind="training", loss_first=2.0, loss_last=0.50, exit_code=0)
    candidate = finished(kind="training", loss_first=2.0, loss_last=0.60, exit_code=0)

    found = rows(compare(api, baseline, candidate))

    assert found["loss_last"]["lower_is_better"]
    assert found["loss_last"]["regression"]
    assert not found["loss_first"]["regression"]
    assert "exit_code" not in found


def test_a_candidate_that_failed_where_the_baseline_succeeded_is_a_regression(api) -> None:
    body = compare(api, finished(matmul_gflops=1.0), finished(Run.Status.FAILED))
    assert rows(body)["status"] == {
        "name": "status",
        "baseline": "succeeded",
        "candidate": "failed",
        "change": None,
        "lower_is_better": False,
        "regression": True,
    }
    assert body["regressions"] == 1


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"baseline": 1}, "candidate"),
        ({"baseline": "x", "candidate": 1}, "baseline"),
        ({"baseline": 10**30, "candidate": 1}, "baseline"),
        ({"baseline": 1, "candidate": 1, "threshold": -1}, "threshold"),
    ],
)
def test_bad_queries_get_400_naming_the_parameter(api, query: dict, field: str) -> None:
    response = api.get(COMPARE, query)
    assert response.status_code == 400
    assert field in response.json()


def test_missing_runs_and_runs_of_two_kinds_are_refused(api) -> None:
    smoke = finished()
    training = finished(kind="training")
    missing = api.get(COMPARE, {"baseline": smoke.pk, "candidate": 10**9})
    assert missing.status_code == 400
    assert missing.json()["candidate"] == ["no such run"]
    mixed = api.get(COMPARE, {"baseline": smoke.pk, "candidate": training.pk})
    assert mixed.status_code == 400
    assert mixed.json()["candidate"] == ["is a training run, the baseline a smoke run"]


def test_comparing_needs_a_user(anon_api, host_api) -> None:
    assert anon_api.get(COMPARE, {"baseline": 1, "candidate": 2}).status_code == 401
    assert host_api.get(COMPARE, {"baseline": 1, "candidate": 2}).status_code == 403
