"""`make run` survives its own parts: each child killed in turn comes back, and a killed
`make run` takes its children with it (issue 14, "`make run` survives its own parts")."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.e2e.standalone import Standalone
from tests.reliability.stacks import ECHO_RUN

pytestmark = pytest.mark.e2e


def test_each_child_killed_in_turn_is_restarted_and_runs_go_on(tmp_path: Path) -> None:
    platform = Standalone(tmp_path)
    try:
        platform.start()
        assert platform.submit_and_wait(ECHO_RUN)["status"] == "succeeded"
        for name in ("worker", "redis", "control", "web"):
            before = platform.children()
            assert name in before, before
            killed_at = time.monotonic()
            os.kill(before[name], signal.SIGKILL)
            old = before[name]
            platform.wait_for(
                lambda name=name, old=old: platform.children().get(name, old) != old,
                120,
                f"a new {name} process",
            )
            run = platform.submit_and_wait(ECHO_RUN)
            recovered = time.monotonic() - killed_at
            print(f"injected: kill -9 {name}; a run {run['status']} {recovered:.1f} s later")
            assert run["status"] == "succeeded", platform.text[-4000:]
            assert f"WARNING {name} exited with code -9; restarting in 1 s" in platform.text
    finally:
        code = platform.stop()
    assert code == 0, platform.text[-4000:]
    assert platform.processes_left() == []


def test_a_killed_make_run_leaves_no_child_behind(tmp_path: Path) -> None:
    platform = Standalone(tmp_path)
    platform.start()
    children = platform.children()
    assert set(children) == {"redis", "web", "control", "worker"}
    assert platform.process is not None
    platform.process.kill()
    platform.process.wait(timeout=30)
    deadline = time.monotonic() + 90
    while platform.processes_left():
        assert time.monotonic() < deadline, (children, *platform.describe_left())
        time.sleep(0.2)
    print(f"injected: kill -9 make run; its {len(children)} children went with it")
