"""The processes of a run: who owns its directory, and how they all stop.

The runner's child may start work in process groups of its own (a training
launcher and its ranks). Whoever stops the run (the runner at its timeout,
the host worker on cancel or at start-up) kills the groups listed here too,
so nothing keeps running on a device the platform hands to another run.

A run directory has one owner at a time: the supervisor takes an ``flock`` on
``OWNER_LOCK_FILE`` and its child and the training processes inherit the
descriptor, so the kernel releases the lock only when the last of them is
gone, however they die. And they do die together: each is started with
``die_with_parent``, so a supervisor killed with SIGKILL leaves no orphan
writing the directory's ``events.jsonl`` and checkpoints. The ranks of a
launcher, which neither inherit the lock nor share a registered group, tie
themselves to it (``tie_rank_to_launcher``).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import fcntl
import os
import signal
import sys
import time
from typing import Callable, Iterable

from workers.contract import script_env
from workers.safefiles import read_text, write_whole

GROUPS_FILE = "process-groups"
# The supervisor's child, the kind's runner: its process group is the run's first.
CHILD_PID_FILE = "child.pid"
OWNER_LOCK_FILE = ".owner.lock"
OWNER_LOCK_FD_ENV = script_env.OWNER_LOCK_FD
_PROC = "/proc"
# Reads of an empty environment before a process is taken for one without (see _environ).
_EXEC_READS = 10
_EXEC_PAUSE_S = 0.01
# prctl(2): the signal a process gets when its parent dies (Linux).
_PR_SET_PDEATHSIG = 1
_LIBC = (
    ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if sys.platform.startswith("linux")
    else None
)


class RunDirBusy(Exception):
    """Another live process owns the run directory."""

    def __init__(self, run_dir: str, pid: str) -> None:
        super().__init__(
            f"run directory {run_dir} is in use by pid {pid or 'unknown'} (or a process it"
            f" started, see {os.path.join(run_dir, CHILD_PID_FILE)}); stop it or use another"
            " --run-dir"
        )
        self.pid = pid


class LockHeld(Exception):
    """A live process holds the lock file; ``pid`` is what it wrote there ("" if nothing)."""

    def __init__(self, path: str, pid: str) -> None:
        super().__init__(f"{path} is held by pid {pid or 'unknown'}")
        self.pid = pid


def hold_lock(path: str) -> int:
    """Take the ``flock`` on ``path`` for this process and write its pid there.

    Returns the descriptor that holds it (the kernel releases the lock when the last
    process holding that descriptor is gone); raises ``LockHeld`` while a live one does.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EAGAIN, errno.EACCES):
            os.close(fd)
            raise
        holder = os.read(fd, 64).decode("ascii", errors="replace").strip()
        os.close(fd)
        raise LockHeld(path, holder) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode("ascii"))
    return fd


def own_run_dir(run_dir: str) -> int:
    """Take the run directory's owner lock for this process; the descriptor holding it.

    Raises ``RunDirBusy`` naming the owner's pid when a live process holds it.
    """
    try:
        return hold_lock(os.path.join(run_dir, OWNER_LOCK_FILE))
    except LockHeld as exc:
        raise RunDirBusy(run_dir, exc.pid) from None


def owner_lock_fds() -> tuple[int, ...]:
    """The inherited owner lock, to pass on to a process this one starts (``pass_fds``)."""
    value = os.environ.get(OWNER_LOCK_FD_ENV, "")
    if value.isdigit():
        with contextlib.suppress(OSError):
            os.fstat(int(value))
            return (int(value),)
    return ()


def die_with_parent(parent: int) -> None:
    """In a new child: SIGKILL it when its parent dies (kill -9, OOM), and exit now if the
    parent already died before the request was made (the child was re-parented)."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def dying_with_this_process() -> Callable[[], None]:
    """A ``preexec_fn`` for ``subprocess.Popen``: the child dies with this process.

    The kernel ties the death signal to the forking thread: call Popen from a
    thread that lives as long as the child should.
    """
    parent = os.getpid()
    return lambda: die_with_parent(parent)


def tie_rank_to_launcher(run_dir: str) -> None:
    """In a rank that a launcher (torchrun) started: die with the launcher, stop with the run.

    torchrun starts each rank in a session of its own and closes the other descriptors, so a
    rank neither holds the owner lock nor is in a registered group: killed with its launcher,
    it would go on writing the directory. Exits at once if the launcher is already gone (this
    process was re-parented) or is not the training process the runner registered.
    """
    launcher = os.getppid()
    die_with_parent(launcher)
    if launcher not in registered_groups(run_dir):
        sys.stderr.write("npulab: the launcher of this rank is gone; not starting\n")
        os._exit(1)
    register_group(run_dir, os.getpgid(0))


def write_pid_file(path: str, pid: int) -> None:
    """``pid`` into ``path`` whole or not at all: whoever reads it (a test, the next host
    worker killing what a dead one left) never sees the file empty; a link the run put at
    the name is replaced, never written through (the worker writes the supervisor's)."""
    write_whole(path, str(pid).encode("ascii"))


def register_group(run_dir: str, pgid: int) -> None:
    with open(os.path.join(run_dir, GROUPS_FILE), "a", encoding="ascii") as handle:
        handle.write(f"{pgid}\n")


def registered_groups(run_dir: str) -> list[int]:
    # The host worker reads it too, as it stops the run: a regular file only, bounded.
    try:
        lines = read_text(os.path.join(run_dir, GROUPS_FILE)).splitlines()
    except OSError:
        return []
    return [int(line) for line in lines if line.strip().isdigit()]


def kill_group(pgid: int, signum: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def kill_registered(run_dir: str, signum: int = signal.SIGKILL, also: Iterable[int] = ()) -> None:
    """Signal the run's registered process groups, and ``also`` these, that are still its own.

    For groups whose leader may be gone and reaped: a number kept in a file outlives its
    group, and the kernel soon hands it out again (where pid_max is 32,768, torch's threads
    use up a few hundred numbers a process), perhaps to another run's ranks.
    """
    for pgid in run_groups(run_dir, [*registered_groups(run_dir), *also]):
        kill_group(pgid, signum)


def run_groups(run_dir: str, pgids: Iterable[int]) -> set[int]:
    """Those of ``pgids`` that still hold a process of the run in ``run_dir``.

    Every process of a run has the run directory in its environment (the supervisor sets
    it for its child, and the rest inherit it): a process is the run's if that path leads
    to the very folder ``run_dir`` does, not merely one of the same name, since the run
    may have moved its folder and put a link to another run's in its place. Without /proc
    (not Linux) there is no telling, and all are taken as the run's.
    """
    wanted = set(pgids)
    if not wanted or not os.path.isdir(_PROC):
        return wanted
    target = _folder_identity(run_dir)
    if target is None:
        return set()
    prefix = f"{script_env.RUN_DIR}=".encode()
    found: set[int] = set()
    for name in os.listdir(_PROC):
        if not name.isdigit():
            continue
        fields = _stat_fields(name)
        if fields is None:
            continue
        state, pgrp = fields
        if pgrp not in wanted or pgrp in found:
            continue
        for entry in _environ(name, zombie=state == b"Z"):
            if entry.startswith(prefix):
                if _folder_identity(os.fsdecode(entry[len(prefix) :])) == target:
                    found.add(pgrp)
                break
    return found


def _folder_identity(path: str) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except (OSError, ValueError):  # gone, or a name with a NUL byte
        return None
    return info.st_dev, info.st_ino


def _stat_fields(pid: str) -> tuple[bytes, int] | None:
    """A process's state and process group, from /proc; None once it is gone."""
    try:
        with open(os.path.join(_PROC, pid, "stat"), "rb") as handle:
            stat = handle.read()
        # After the command's closing parenthesis: state, parent, process group.
        fields = stat[stat.rindex(b")") + 1 :].split()
        return fields[0], int(fields[2])
    except (OSError, ValueError, IndexError):
        return None


def _environ(pid: str, zombie: bool) -> list[bytes]:
    """A process's environment as its entries; none if it is gone or another user's.

    A process in the middle of an exec reads as empty for a moment: read again, briefly.
    """
    for _ in range(_EXEC_READS):
        try:
            with open(os.path.join(_PROC, pid, "environ"), "rb") as handle:
                environ = handle.read()
        except OSError:
            return []
        if environ or zombie:
            return environ.split(b"\0")
        time.sleep(_EXEC_PAUSE_S)
    return []
