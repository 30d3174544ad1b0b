"""One owner per run directory, and a run's processes die with their supervisor."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.waiting import alive, wait_until
from tests.workers.test_run_cli import run, start
from workers.contract import script_env
from workers.contract.exits import EXIT_RUN_DIR_BUSY
from workers.processes import (
    GROUPS_FILE,
    OWNER_LOCK_FILE,
    kill_registered,
    register_group,
    write_pid_file,
)

LONG_TRAINING = {
    "kind": "training",
    "device_type": "cpu",
    "entry": "builtin:cnn",
    "max_steps": 100000,
}
# Writes nothing, so no broken pipe stops it when its supervisor is gone.
QUIET_TRAINING = {"kind": "training", "device_type": "cpu", "entry": "quiet.py"}
QUIET_SCRIPT = "import threading\n\nthreading.Event().wait()\n"
# Each rank of a torchrun launch writes its pid, then waits: torchrun starts every rank in a
# session of its own, out of the process group the runner registered.
RANKS_SCRIPT = (
    "import os, threading\n\n"
    "with open(f\"rank-{os.environ['LOCAL_RANK']}.pid\", 'w') as handle:\n"
    "    handle.write(str(os.getpid()))\n"
    "threading.Event().wait()\n"
)
RANKS_TRAINING = {**QUIET_TRAINING, "entry": "ranks.py", "devices": 2}
DEADLINE_S = 120.0
# The run that shows a directory is free again: the test-only kind (NPULAB_KINDS, set for
# every process the tests start), which imports no torch and so starts in a fraction of a
# second.
NEXT_RUN = {"kind": "echo", "device_type": "cpu"}


def wait_for(condition: Callable[[], object], what: str) -> object:
    return wait_until(condition, what, DEADLINE_S)


def holds_owner_lock(pid: int, run_dir: Path) -> bool:
    lock = str(run_dir / OWNER_LOCK_FILE)
    fds = Path(f"/proc/{pid}/fd")
    return any(os.readlink(str(fd)) == lock for fd in fds.iterdir())


def started_training(run_dir: Path) -> tuple[int, int]:
    """The pids of the runner's child and of the training process, once both run."""

    def pids() -> tuple[int, int] | None:
        try:
            child = int((run_dir / "child.pid").read_text())
            training = int((run_dir / GROUPS_FILE).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return (child, training) if alive(child) and alive(training) else None

    return wait_for(pids, "the child and the training process to start")  # type: ignore[return-value]


@pytest.fixture
def owners() -> Iterator[list[subprocess.Popen]]:
    """Supervisors a test started; killed at its end, their children with them."""
    started: list[subprocess.Popen] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=DEADLINE_S)


def start_owner(
    tmp_path: Path, spec: dict, owners: list[subprocess.Popen]
) -> tuple[Path, subprocess.Popen]:
    """A supervisor of ``spec`` on a new run directory holding the tests' scripts."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "quiet.py").write_text(QUIET_SCRIPT)
    (run_dir / "ranks.py").write_text(RANKS_SCRIPT)
    owner = start(spec, run_dir)
    owners.append(owner)
    return run_dir, owner


def stop_owner(owner: subprocess.Popen) -> None:
    owner.send_signal(signal.SIGTERM)
    owner.communicate(timeout=DEADLINE_S)


@pytest.mark.parametrize("spec", [LONG_TRAINING, QUIET_TRAINING], ids=["cnn", "quiet"])
def test_children_die_with_a_killed_supervisor(
    tmp_path: Path, spec: dict, owners: list[subprocess.Popen]
) -> None:
    run_dir, owner = start_owner(tmp_path, spec, owners)
    child, training = started_training(run_dir)
    assert holds_owner_lock(child, run_dir)
    assert holds_owner_lock(training, run_dir)

    owner.kill()
    owner.communicate(timeout=DEADLINE_S)

    wait_for(lambda: not alive(child), f"the runner's child {child} to die")
    wait_for(lambda: not alive(training), f"the training process {training} to die")
    # The kernel released the lock with its last holder: the directory is free again.
    code, stderr, events = run(NEXT_RUN, run_dir)
    assert code == 0, stderr
    assert events[-1]["type"] == "result"
    assert events[-1]["status"] == "succeeded"


def test_a_second_supervisor_refuses_a_live_owner_and_touches_nothing(
    tmp_path: Path, owners: list[subprocess.Popen]
) -> None:
    run_dir = tmp_path / "run"
    owner = start(LONG_TRAINING, run_dir)
    owners.append(owner)
    child, training = started_training(run_dir)
    events_file = run_dir / "events.jsonl"
    # Freeze the owner so that its events file is still while the second one tries.
    frozen = [owner.pid, child, training]
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        before = events_file.read_bytes()
        second = start(NEXT_RUN, run_dir)
        _, stderr = second.communicate(timeout=DEADLINE_S)
        assert second.returncode == EXIT_RUN_DIR_BUSY, stderr
        assert f"in use by pid {owner.pid}" in stderr
        after = events_file.read_bytes()
        assert len(after) == len(before)
        assert hashlib.sha256(after).digest() == hashlib.sha256(before).digest()
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
    assert alive(child)
    assert alive(training)

    stop_owner(owner)
    wait_for(lambda: not alive(training), "the training process to stop")
    code, stderr, events = run(NEXT_RUN, run_dir)
    assert code == 0, stderr
    assert events[-1]["status"] == "succeeded"


def started_ranks(run_dir: Path) -> list[int]:
    def pids() -> list[int] | None:
        try:
            found = [int((run_dir / f"rank-{rank}.pid").read_text()) for rank in (0, 1)]
        except (OSError, ValueError):
            return None
        return found if all(map(alive, found)) else None

    return wait_for(pids, "both ranks to start")  # type: ignore[return-value]


@pytest.mark.parametrize("killed", ["supervisor", "launcher"])
def test_the_ranks_of_a_launch_die_with_it(
    tmp_path: Path, killed: str, owners: list[subprocess.Popen]
) -> None:
    run_dir, owner = start_owner(tmp_path, RANKS_TRAINING, owners)
    _, launcher = started_training(run_dir)
    ranks = started_ranks(run_dir)

    if killed == "supervisor":
        owner.kill()
        owner.communicate(timeout=DEADLINE_S)
    else:
        os.kill(launcher, signal.SIGKILL)

    for rank in ranks:
        wait_for(lambda rank=rank: not alive(rank), f"rank process {rank} to die")
    if killed == "launcher":
        # The runner saw its training process die and ended the run.
        owner.communicate(timeout=DEADLINE_S)
    # No rank is left writing the directory: a new supervisor may take it.
    code, stderr, events = run(NEXT_RUN, run_dir)
    assert code == 0, stderr
    assert events[-1]["status"] == "succeeded"


def test_a_pid_file_is_never_read_empty_or_partial(tmp_path: Path) -> None:
    # The next host worker reads supervisor.pid and child.pid to kill what a dead one left;
    # a file caught between its truncation and its write would keep that process alive.
    path = str(tmp_path / "child.pid")
    write_pid_file(path, 1)
    stop = threading.Event()

    def rewrite() -> None:
        pid = 10
        while not stop.is_set():
            pid = pid * 10 % 99_999_989 + 1
            write_pid_file(path, pid)

    writer = threading.Thread(target=rewrite)
    writer.start()
    try:
        seen = [Path(path).read_text() for _ in range(20_000)]
    finally:
        stop.set()
        writer.join()
    assert all(text.isdigit() for text in seen)
    assert len(set(seen)) > 1  # it was rewritten while read
    assert os.listdir(tmp_path) == ["child.pid"]


def group_of(run_dir: Path, tmp_path: Path, script: str = "") -> subprocess.Popen:
    """A process group of its own, its processes told to be of the run in ``run_dir``."""
    return subprocess.Popen(
        ["sh", "-c", script or "sleep 600"],
        env=dict(os.environ, **{script_env.RUN_DIR: str(run_dir)}),
        start_new_session=True,
        cwd=tmp_path,
    )


def test_a_registered_group_number_that_is_another_runs_now_is_left_alone(
    tmp_path: Path,
) -> None:
    # The number of a group this run registered, after the group ended and the kernel
    # handed the number to another run's processes: killing it blind would kill those.
    run_dir, other_run = tmp_path / "run", tmp_path / "other-run"
    run_dir.mkdir()
    other_run.mkdir()
    other = group_of(other_run, tmp_path)
    own = group_of(run_dir / ".", tmp_path)  # the same directory, spelt another way
    register_group(str(run_dir), other.pid)
    register_group(str(run_dir), own.pid)
    try:
        kill_registered(str(run_dir))
        assert own.wait(timeout=DEADLINE_S) == -signal.SIGKILL
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_a_group_whose_leader_is_gone_is_killed_by_its_members(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    leader = group_of(run_dir, tmp_path, "sleep 600 & echo $! > member.pid")
    assert leader.wait(timeout=DEADLINE_S) == 0
    member = int(wait_for(lambda: (tmp_path / "member.pid").read_text().strip(), "the member"))
    assert alive(member)
    kill_registered(str(run_dir), also=[leader.pid])
    wait_for(lambda: not alive(member), f"the group's member {member} to die")
