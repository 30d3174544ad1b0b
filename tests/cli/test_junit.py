"""--junit reports: read back with junitparser as a CI server would, valid against the XSD."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import xmlschema
from junitparser import Error, Failure, JUnitXml, Skipped

from npulab.runs.models import Run
from tests.cli.conftest import finished_run, log_lines
from tests.paths import TESTS_DIR
from workers.cli import junit
from workers.contract import exits

SCHEMA = xmlschema.XMLSchema(str(TESTS_DIR / "fixtures" / "junit.xsd"))


def read(path: Path) -> list[Any]:
    """Every suite of a report, after checking the report against the schema."""
    SCHEMA.validate(str(path))
    xml = JUnitXml.fromfile(str(path))
    return list(xml)


def cases(suite: Any) -> dict[str, Any]:
    return {case.name: case for case in suite}


def outcome(case: Any) -> str:
    kinds = {type(result) for result in case.result}
    if Failure in kinds:
        return "failure"
    if Error in kinds:
        return "error"
    if Skipped in kinds:
        return "skipped"
    return "passed"


@pytest.mark.django_db(transaction=True)
def test_a_smoke_run_is_one_case_per_step_and_its_result(npulab, owner, tmp_path) -> None:
    run = finished_run(
        owner,
        Run.Status.FAILED,
        exits.PROCESS_EXIT,
        steps=[("device", "pass"), ("matmul", "fail"), ("train", "skip")],
        reason="matmul: max abs error 3.0 > 0.001",
    )
    # Terminal colours and a bell in the log: XML 1.0 allows neither.
    log_lines(run, "\x1b[31mred\x1b[0m", "bell \x07 byte")
    report = tmp_path / "reports" / "smoke.xml"

    shown = npulab("runs", "show", str(run.pk), "--junit", str(report), "--log-lines", "5")

    assert shown.exit_code == exits.CLI_SUCCEEDED
    (suite,) = read(report)
    assert suite.name == f"npulab.smoke.run-{run.pk}"
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (4, 2, 0, 1)
    found = cases(suite)
    assert list(found) == ["device", "matmul", "train", "result"]
    assert {name: outcome(case) for name, case in found.items()} == {
        "device": "passed",
        "matmul": "failure",
        "train": "skipped",
        "result": "failure",
    }
    assert found["matmul"].classname == "npulab.smoke"
    assert found["matmul"].time == pytest.approx(0.25)
    assert found["matmul"].result[0].message == "max abs error 3.0 > 0.001"
    assert found["result"].result[0].type == exits.PROCESS_EXIT
    properties = {p.name: p.value for p in suite.properties()}
    assert (properties["id"], properties["status"]) == (str(run.pk), "failed")
    # junitparser reads a suite's <system-out> only through its element.
    log = suite._elem.find("system-out").text
    assert "?[31mred" in log
    assert "bell ? byte" in log


@pytest.mark.django_db(transaction=True)
def test_compare_is_one_case_per_number_and_a_regression_fails(npulab, owner, tmp_path) -> None:
    baseline = finished_run(owner, matmul_gflops=100.0, steps_per_s=50.0)
    candidate = finished_run(owner, matmul_gflops=80.0, steps_per_s=51.0)
    report = tmp_path / "compare.xml"

    result = npulab("compare", str(baseline.pk), str(candidate.pk), "--junit", str(report))

    assert result.exit_code == exits.CLI_SUCCEEDED
    (suite,) = read(report)
    found = cases(suite)
    assert set(found) == {"status", "matmul_gflops", "steps_per_s"}
    assert outcome(found["matmul_gflops"]) == "failure"
    assert outcome(found["steps_per_s"]) == outcome(found["status"]) == "passed"
    assert found["matmul_gflops"].classname == "npulab.compare.smoke"
    assert "change -20.00%" in found["matmul_gflops"].result[0].message
    assert (suite.tests, suite.failures) == (3, 1)


def run_detail(**fields: Any) -> dict[str, Any]:
    base = {
        "id": 7,
        "kind": "smoke",
        "status": "succeeded",
        "exit_cause": "completed",
        "exit_reason": "",
        "infrastructure_failure": False,
        "duration_s": 1.5,
        "created": "2026-12-01T10:00:00.123456Z",
        "steps": [],
    }
    return {**base, **fields}


@pytest.mark.parametrize(
    ("fields", "code", "expected"),
    [
        ({}, None, "passed"),
        ({"status": "lost", "exit_cause": "worker_lost"}, None, "error"),
        (
            {"status": "failed", "exit_cause": "start_failed", "infrastructure_failure": True},
            None,
            "error",
        ),
        ({"status": "cancelled", "exit_cause": "cancelled"}, None, "skipped"),
        # Killed at its timeout on the host: infrastructure, like exit code 3.
        ({"status": "failed", "exit_cause": "timeout"}, None, "error"),
        ({"status": "failed", "exit_cause": "process_exit"}, None, "failure"),
        ({"status": "running", "exit_cause": ""}, exits.CLI_GAVE_UP, "error"),
    ],
)
def test_the_result_case_says_whose_fault_it_was(tmp_path, fields, code, expected) -> None:
    report = tmp_path / "run.xml"
    junit.write(report, [junit.run_suite(run_detail(**fields), lambda path: {}, code)])
    (suite,) = read(report)
    assert outcome(cases(suite)["result"]) == expected


def test_a_kind_plugs_in_its_own_cases_by_name(tmp_path, monkeypatch) -> None:
    """What operator coverage will do: one case per op x dtype from its own results."""
    monkeypatch.setattr(junit, "_builders", dict(junit._builders))
    asked = []

    @junit.case_builder("coverage")
    def coverage_cases(run: dict[str, Any], fetch: Any) -> list[junit.Case]:
        asked.append(fetch(f"runs/{run['id']}/coverage/"))
        return [
            junit.Case(f"{op}[{dtype}]", "npulab.coverage", outcome=verdict)
            for op, dtype, verdict in [("matmul", "fp16", "passed"), ("conv2d", "bf16", "failure")]
        ]

    detail = run_detail(kind="coverage", status="failed", exit_cause="process_exit")
    report = tmp_path / "coverage.xml"
    junit.write(report, [junit.run_suite(detail, lambda path: {"path": path})])

    (suite,) = read(report)
    assert list(cases(suite)) == ["matmul[fp16]", "conv2d[bf16]", "result"]
    assert asked == [{"path": "runs/7/coverage/"}]
    assert suite.name == "npulab.coverage.run-7"


@pytest.mark.django_db(transaction=True)
def test_a_coverage_run_is_one_case_per_cell_read_page_by_page(npulab, owner, tmp_path) -> None:
    from tests.coverage.builders import coverage_run, ingest, op_result

    run = coverage_run(submitted_by=owner)
    cells = [op_result(f"op{i:04d}", "float32") for i in range(1203)]
    cells += [
        op_result("sort", "float16", "unsupported"),
        op_result("linalg.svd", "float32", "crash", error="SIGSEGV"),
        op_result("add", "float32", "mismatch", phase="backward"),
    ]
    ingest(run, cells)
    report = tmp_path / "coverage.xml"

    shown = npulab("runs", "show", str(run.pk), "--junit", str(report))

    assert shown.exit_code == exits.CLI_SUCCEEDED, shown.output
    (suite,) = read(report)
    found = cases(suite)
    assert len(found) == 1206 + 1  # every cell across two pages, and the result
    assert outcome(found["sort float16"]) == "skipped"
    assert outcome(found["linalg.svd float32"]) == "failure"
    assert found["linalg.svd float32"].result[0].type == "crash"
    assert found["linalg.svd float32"].classname == "npulab.coverage.linalg"
    assert outcome(found["add float32 backward"]) == "failure"
    assert outcome(found["op1202 float32"]) == "passed"
