"""``python -m workers.run``: the runner as a user (and the host worker) calls it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.paths import REPO_DIR as REPO
from tests.waiting import alive, wait_until
from workers.events import iter_events

FAST_SMOKE = {"kind": "smoke", "device_type": "cpu", "matmul_size": 256, "train_steps": 20}


def python38() -> str | None:
    """A working Python 3.8, if this machine has one (pyenv's shim may exist without it)."""
    for candidate in ("python3.8", *sorted(Path.home().glob(".pyenv/versions/3.8*/bin/python3.8"))):
        try:
            done = subprocess.run([str(candidate), "-c", "pass"], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return str(candidate)
    return None


def start(spec: object, run_dir: Path, python: str = sys.executable, **env: str):
    spec_path = run_dir.parent / f"{run_dir.name}.spec.json"
    spec_path.write_text(spec if isinstance(spec, str) else json.dumps(spec))
    environ = dict(os.environ, PYTHONPATH=str(REPO), **env)
    return subprocess.Popen(
        [python, "-m", "workers.run", str(spec_path), "--run-dir", str(run_dir)],
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run(spec: object, run_dir: Path, python: str = sys.executable, **env: str):
    process = start(spec, run_dir, python, **env)
    _, stderr = process.communicate(timeout=300)
    events = list(iter_events(str(run_dir / "events.jsonl")))
    if process.returncode:
        # The runner logs its children's stderr as events, not on its own: shown by pytest
        # when the test fails, with the reason the runner gave.
        for event in events[-40:]:
            print(json.dumps(event))
    return process.returncode, stderr, events


def by_type(events: list[dict], kind: str) -> list[dict]:
    return [event for event in events if event["type"] == kind]


def test_smoke_on_cpu_succeeds_with_steps_and_metrics(tmp_path: Path) -> None:
    # Queueing fields of an API submission are ignored: one file serves both.
    code, stderr, events = run(dict(FAST_SMOKE, host="any", priority=3), tmp_path / "run")
    assert code == 0, stderr
    steps = {step["name"]: step for step in by_type(events, "step")}
    assert {name: step["status"] for name, step in steps.items()} == {
        "device": "pass",
        "matmul": "pass",
        "train": "pass",
    }
    assert steps["matmul"]["detail"]["max_rel_error"] < 1e-4
    losses = [m for m in by_type(events, "metric") if m["key"] == "train/loss"]
    assert [m["step"] for m in losses] == list(range(20))
    assert losses[-1]["value"] < losses[0]["value"]
    assert events[-1]["type"] == "result"
    assert events[-1]["status"] == "succeeded"
    assert events[-1]["summary"]["steps"] == {"device": "pass", "matmul": "pass", "train": "pass"}


def test_invalid_spec_exits_2_with_the_reason_on_stderr(tmp_path: Path) -> None:
    code, stderr, events = run(
        {"kind": "smoke", "device_type": "cpu", "devices": 0}, tmp_path / "r"
    )
    assert code == 2
    assert "invalid spec: devices: must be at least 1" in stderr
    assert events[-1]["status"] == "failed"
    assert events[-1]["cause"] == "spec_invalid"


def test_a_file_that_is_not_json_exits_2(tmp_path: Path) -> None:
    code, stderr, _ = run("{kind: smoke", tmp_path / "r")
    assert code == 2
    assert "is not valid JSON" in stderr


def test_a_missing_device_stack_fails_the_device_step_and_skips_the_rest(tmp_path: Path) -> None:
    # This machine has no torch_npu: exactly what a host without CANN shows.
    code, _, events = run({"kind": "smoke", "device_type": "npu"}, tmp_path / "r")
    assert code == 1
    steps = {step["name"]: step for step in by_type(events, "step")}
    assert steps["device"]["status"] == "fail"
    assert "import torch_npu failed: ModuleNotFoundError" in steps["device"]["error"]
    assert steps["matmul"]["status"] == steps["train"]["status"] == "skip"
    assert events[-1]["reason"].startswith("device: import torch_npu failed")


def test_timeout_kills_the_child_and_says_so(tmp_path: Path) -> None:
    code, _, events = run(dict(FAST_SMOKE, timeout_s=1, train_steps=100000), tmp_path / "r")
    assert code == 1
    result = events[-1]
    assert (result["status"], result["cause"], result["reason"]) == (
        "failed",
        "timeout",
        "timed out after 1 s",
    )
    child = int((tmp_path / "r" / "child.pid").read_text())
    wait_until(lambda: not alive(child), f"the run's child {child} to die")


def test_a_segfault_in_the_child_is_reported_not_lost(tmp_path: Path) -> None:
    # sitecustomize runs at interpreter start: the child crashes like a bad operator would.
    crash = tmp_path / "crash"
    crash.mkdir()
    (crash / "sitecustomize.py").write_text(
        "import os, signal, sys\n"
        "if '--child' in sys.argv:\n"
        "    print('about to crash', file=sys.stderr, flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGSEGV)\n"
    )
    spec = dict(FAST_SMOKE, env={"PYTHONPATH": str(crash)})
    code, _, events = run(spec, tmp_path / "r")
    assert code == 1
    result = events[-1]
    assert result["cause"] == "process_exit"
    assert result["reason"] == (
        "runner killed by signal SIGSEGV (11); last stderr line: about to crash"
    )
    assert by_type(events, "log")[-1]["line"] == "about to crash"


def test_a_child_that_dies_of_an_exception_is_named_by_it(tmp_path: Path) -> None:
    crash = tmp_path / "crash"
    crash.mkdir()
    (crash / "sitecustomize.py").write_text(
        "import os, sys, traceback\n"
        "if '--child' in sys.argv:\n"
        "    try:\n"
        "        raise ImportError('libascendcl.so: cannot open shared object file')\n"
        "    except ImportError:\n"
        "        traceback.print_exc()\n"
        "        print('after the traceback', file=sys.stderr, flush=True)\n"
        "        os._exit(7)\n"
    )
    spec = dict(FAST_SMOKE, env={"PYTHONPATH": str(crash)})
    code, _, events = run(spec, tmp_path / "r")
    assert code == 1
    assert events[-1]["reason"] == (
        "runner exited with code 7 without a result: "
        "ImportError: libascendcl.so: cannot open shared object file"
    )


def test_sigterm_stops_the_run_and_still_writes_the_result(tmp_path: Path) -> None:
    run_dir = tmp_path / "r"
    process = start(dict(FAST_SMOKE, train_steps=100000), run_dir)
    deadline = time.monotonic() + 60
    while not (run_dir / "child.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int((run_dir / "child.pid").read_text())
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 1
    result = list(iter_events(str(run_dir / "events.jsonl")))[-1]
    assert (result["status"], result["cause"]) == ("failed", "terminated")
    assert result["reason"] == "stopped by SIGTERM"
    wait_until(lambda: not alive(child), f"the run's child {child} to die")


def test_host_side_modules_run_on_python_3_8(tmp_path: Path) -> None:
    interpreter = python38()
    if interpreter is None:
        pytest.skip("no Python 3.8 on this machine")
    # No torch in that interpreter: the runner still validates, supervises and reports.
    code, _, events = run({"kind": "smoke", "device_type": "cpu"}, tmp_path / "r", interpreter)
    assert code == 1
    device = by_type(events, "step")[0]
    assert device["error"].startswith("import torch failed: ModuleNotFoundError")
    code, stderr, _ = run({"kind": "smoke"}, tmp_path / "r2", interpreter)
    assert (code, stderr.strip()) == (2, "invalid spec: device_type: this field is required")
