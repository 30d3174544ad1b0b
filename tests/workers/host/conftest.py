"""A host agent on a fake platform, in a temporary work directory."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.workers.host.fakes import FakePlatform, host_config
from workers.host.agent import SUPERVISOR_PID, HostAgent, kill_run_processes


@pytest.fixture
def platform() -> FakePlatform:
    return FakePlatform()


@pytest.fixture
def work_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "work"
    path.mkdir()
    yield path
    # A test that failed half-way must not leave a run behind on the machine.
    for pid_file in path.glob(f"runs/*/attempt-*/{SUPERVISOR_PID}"):
        with contextlib.suppress(OSError, ValueError):
            pid = int(pid_file.read_text())
            if b"workers.run" in Path(f"/proc/{pid}/cmdline").read_bytes():
                kill_run_processes(str(pid_file.parent), pid)


@pytest.fixture
def agent(platform: FakePlatform, work_dir: Path) -> HostAgent:
    return HostAgent(host_config(work_dir), platform)
