"""op_result and coverage_plan events land in the coverage tables, one bad line never the batch."""

from __future__ import annotations

import pytest

from npulab.coverage.models import CoveragePlan, OpResult
from npulab.runs.models import RunEvent
from tests.coverage.builders import coverage_run, ingest, op_result, plan
from tests.factories import RunFactory
from workers.contract.kinds import validate
from workers.kinds.coverage import BACKWARD, CRASH, MISMATCH

pytestmark = pytest.mark.django_db


def test_results_and_plan_are_stored_in_the_kinds_tables_not_as_events() -> None:
    run = coverage_run(status="running")
    ingest(
        run,
        [
            plan(3),
            op_result("add", "float32"),
            op_result("nn.functional.conv2d", "float16", MISMATCH, max_abs_err=0.5),
            op_result("add", "float32", phase=BACKWARD),
        ],
    )
    assert CoveragePlan.objects.get(run=run).total == 3
    rows = {(r.op, r.dtype, r.phase): r for r in OpResult.objects.filter(run=run)}
    assert set(rows) == {
        ("add", "float32", "forward"),
        ("add", "float32", "backward"),
        ("nn.functional.conv2d", "float16", "forward"),
    }
    conv = rows["nn.functional.conv2d", "float16", "forward"]
    assert (conv.status, conv.max_abs_err, conv.family) == (MISMATCH, 0.5, "nn.functional")
    assert rows["add", "float32", "forward"].family == "torch"
    assert not RunEvent.objects.filter(run=run).exists()


def test_a_batch_delivered_twice_keeps_one_row_per_cell() -> None:
    run = coverage_run(status="running")
    batch = [op_result("add", "float32"), op_result("mul", "float32", CRASH)]
    ingest(run, batch)
    ingest(run, batch)
    assert OpResult.objects.filter(run=run).count() == 2


def test_a_malformed_result_becomes_a_visible_log_line_and_the_rest_is_kept() -> None:
    run = coverage_run(status="running")
    ingest(
        run,
        [
            op_result("add", "float32", status="sort-of"),
            op_result("add", "float64", phase="sideways"),
            {"type": "op_result", "op": "mul", "status": "pass"},  # no dtype
            op_result("sub", "float32"),
        ],
    )
    assert list(OpResult.objects.filter(run=run).values_list("op", flat=True)) == ["sub"]
    lines = [e.data["line"] for e in RunEvent.objects.filter(run=run, type="log")]
    assert len(lines) == 3
    assert "op_result.status must be one of pass" in lines[0]
    assert "op_result.pass must be one of forward, backward" in lines[1]
    assert "needs 'dtype'" in lines[2]


def test_nul_bytes_and_lone_surrogates_in_a_users_error_text_are_stored() -> None:
    run = coverage_run(status="running")
    ingest(
        run,
        [
            op_result(
                "add",
                "float32",
                "error",
                error="bad\x00byte \ud800 here",
                detail={"k\x00": "v\x00"},
            )
        ],
    )
    row = OpResult.objects.get(run=run)
    assert row.error == "bad\ufffdbyte ? here"
    assert row.detail == {"k\ufffd": "v\ufffd"}


def test_a_long_error_is_cut_and_says_so() -> None:
    run = coverage_run(status="running")
    ingest(run, [op_result("add", "float32", "error", error="x" * 10000)])
    error = OpResult.objects.get(run=run).error
    assert error == "x" * 4000 + " [... 6000 chars cut]"


def test_a_coverage_event_from_another_kinds_run_is_refused_visibly() -> None:
    smoke = RunFactory(spec=validate({"kind": "smoke", "device_type": "cpu"}))
    ingest(smoke, [op_result("add", "float32")])
    assert not OpResult.objects.filter(run=smoke).exists()
    (line,) = [e.data["line"] for e in RunEvent.objects.filter(run=smoke, type="log")]
    assert "op_result events belong to coverage runs, not to a smoke run" in line
