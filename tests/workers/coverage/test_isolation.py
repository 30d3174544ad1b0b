"""A crashing, a hanging and a process-corrupting op cost only their own rows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.paths import REPO_DIR
from tests.waiting import wait_until
from tests.workers.coverage.conftest import RUN_DEADLINE_S, run_spec

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


def _forks_of(pid: int) -> list[int]:
    """The children of ``pid`` that are forks of it, not a program it runs for a moment (an
    import may run ``ldconfig``, which a loaded machine lets a poll see)."""
    own = _cmdline(pid)
    return [child for child in _children_of(pid) if _cmdline(child) == own]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _wait_for(condition, what: str) -> None:
    wait_until(condition, what, RUN_DEADLINE_S)


def test_a_killed_runner_takes_its_children_with_it(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps(
            {
                "kind": "coverage",
                "device_type": "cpu",
                "op_set": "list",
                "ops": [f"{FAULTS}:HANG"],
                "dtypes": ["float32"],
                "op_timeout_s": 3600,
            }
        )
    )
    run_dir = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(REPO_DIR))
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "workers.run", str(spec), "--run-dir", str(run_dir)],
        cwd=REPO_DIR,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        pid_file = run_dir / "child.pid"
        _wait_for(pid_file.exists, "the runner to start")
        runner = int(pid_file.read_text())
        _wait_for(lambda: _forks_of(runner), "the runner to fork a child for the hanging op")
        (child,) = _forks_of(runner)
        os.kill(runner, signal.SIGKILL)
        _wait_for(lambda: not Path(f"/proc/{child}").exists(), "the orphaned child to die")
        assert supervisor.wait(timeout=RUN_DEADLINE_S) == 1
        stderr = supervisor.stderr.read().decode()
        assert "BrokenPipeError" not in stderr
    finally:
        supervisor.kill()
        supervisor.wait()
