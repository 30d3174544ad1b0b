"""A crashing, a hanging and a process-corrupting op cost only their own rows."""

from __future__ import annotations

import os
from pathlib import Path

from tests.workers.coverage.conftest import run_spec

FAULTS = "tests.workers.coverage.fault_ops"


def test_a_crash_and_a_hang_are_recorded_and_every_other_result_is_kept(tmp_path: Path) -> None:
    run = run_spec(
        {
            "op_set": "list",
            "ops": ["add", f"{FAULTS}:ABORT", "mul", f"{FAULTS}:HANG", "sub"],
            "dtypes": ["float32"],
            "op_timeout_s": 3,
            "processes": 1,  # one child: the faults hit cases that share it with others
        },
        tmp_path / "run",
    )
    assert run.code == 0, run.stderr
    assert run.result["status"] == "succeeded"
    assert run.plan["total"] == len(run.rows) == 5
    crash = run.row("npulab_test.abort")
    assert crash["status"] == "crash"
    assert crash["error"] == "the process was killed by SIGABRT"
    assert crash["detail"]["shapes"] == [[3]]
    hang = run.row("npulab_test.hang")
    assert hang["status"] == "timeout"
    assert hang["error"] == "no result after 3 s: the process was killed"
    assert [run.row(op)["status"] for op in ("add", "mul", "sub")] == ["pass"] * 3
    summary = run.result["summary"]
    assert (summary["pass"], summary["crash"], summary["timeout"], summary["total"]) == (3, 1, 1, 5)
    # The runner process (the supervisor's child) ended by itself, and left no child behind.
    runner = int((tmp_path / "run" / "child.pid").read_text())
    assert not os.path.exists(f"/proc/{runner}")


def test_the_op_that_corrupts_the_process_is_blamed_not_the_one_that_crashes(
    tmp_path: Path,
) -> None:
    run = run_spec(
        {
            "op_set": "list",
            "ops": ["add", f"{FAULTS}:CORRUPT", "mul", "sub", f"{FAULTS}:VICTIM", "neg"],
            "dtypes": ["float32"],
            "processes": 1,
        },
        tmp_path / "run",
    )
    assert run.code == 0, run.stderr
    assert run.plan["total"] == len(run.rows) == 6
    culprit = run.row("npulab_test.corrupt")
    assert culprit["status"] == "crash"
    assert culprit["error"].startswith("corrupts the process for later ops: npulab_test.victim")
    assert "SIGABRT" in culprit["error"]
    victim = run.row("npulab_test.victim")
    assert victim["status"] == "pass"
    assert victim["detail"]["crashed_after"]["op"] == "npulab_test.corrupt"
    assert [run.row(op)["status"] for op in ("add", "mul", "sub", "neg")] == ["pass"] * 4
