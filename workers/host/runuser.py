"""The unprivileged users runs execute as, so a submitted run cannot read what the worker
can, nor what another run can.

A root host worker (often root on an accelerator host, to reach the devices' tools)
runs each run attempt as a user of its own for as long as the attempt lives: it leases
one of the run-user pool (``npulab-run-0`` … ``npulab-run-<N-1>``, made by ``make run``,
the worker's systemd unit and the e2e harness with ``python -m workers.host.runuser``),
gives the run's directories to it, starts the run's supervisor as that user with its
groups (on Ascend hosts, HwHiAiUser: the devices' group), and when the attempt ends kills
whatever still runs as that user and takes the directories back (the worker's, mode 700)
before the user is leased again. Two runs at once never share a uid, so neither reads
the other's directory nor, through ``/proc/<pid>/cwd`` and ``environ``, its processes;
a later run of the same user finds the earlier one's directory closed to it. The
worker's token file, the platform's secret key and database stay readable by the
worker only.

An operator may name one user instead (``--run-user NAME``): every run executes as it,
which keeps the worker's files from runs but not runs from each other while they live.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import grp
import logging
import os
import pwd
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Iterator, Sequence

from workers.host import acl

log = logging.getLogger(__name__)

# The folder that holds this package: a run imports ``workers`` from it.
PACKAGE_ROOT = os.path.realpath(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)


class RunUserError(Exception):
    """The run user cannot be used: unknown, or unable to run the run's interpreter."""


class RunUser:
    """A user name resolved once: its uid, primary gid and supplementary groups."""

    def __init__(self, name: str):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise RunUserError(f"run user {name!r} does not exist on this host") from None
        self.name = name
        self.uid = entry.pw_uid
        self.gid = entry.pw_gid
        self.groups: list[int] = os.getgrouplist(name, entry.pw_gid)

    def group_names(self) -> list[str]:
        names = []
        for gid in self.groups:
            try:
                names.append(grp.getgrgid(gid).gr_name)
            except KeyError:
                names.append(str(gid))
        return names

    def become(self) -> Callable[[], None]:
        """A preexec_fn: the child drops to this user (groups first, while it still may)."""
        uid, gid, groups = self.uid, self.gid, list(self.groups)

        def drop() -> None:
            os.setgroups(groups)
            os.setgid(gid)
            os.setuid(uid)

        return drop

    def env(self, home: str) -> dict[str, str]:
        """The variables that say who the process is; its home is a directory of the run."""
        return {"USER": self.name, "LOGNAME": self.name, "HOME": home}

    def give(self, paths: Iterable[str]) -> None:
        """Make ``paths`` (and everything under them) the run user's; each top folder is
        closed to every other user (mode 700), whatever the worker's umask made it."""
        for top in paths:
            _own_tree(top, self.uid, self.gid, top_mode=0o700)

    def check_can_run(self, python: str, work_dir: str, timeout: float = 60.0) -> None:
        """RunUserError unless this user can start ``python``, import the runner and reach
        ``work_dir`` (every folder above it must let the user through)."""
        probe = f"import os, workers.run; os.stat({work_dir!r})"
        try:
            result = subprocess.run(
                [python, "-c", probe],
                cwd="/",
                env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": PACKAGE_ROOT},
                preexec_fn=self.become(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise RunUserError(f"run user {self.name!r} cannot start {python}: {exc}") from None
        if result.returncode != 0:
            last = last_words(result)
            raise RunUserError(
                f"run user {self.name!r} cannot run {python} with this package "
                f"({PACKAGE_ROOT}) and work directory ({work_dir}): {last}"
            )


def last_words(result: subprocess.CompletedProcess) -> str:
    """Why a start-up check's process failed: its last line on stderr, or the signal that
    killed it without a word (SIGKILL: a process of its user's killed them all)."""
    lines = result.stderr.decode("utf-8", "replace").strip().splitlines()
    if lines:
        return lines[-1]
    if result.returncode < 0:
        return f"killed by signal {-result.returncode}"
    return f"exit status {result.returncode}, nothing on stderr"


def take_back(paths: Iterable[str]) -> None:
    """Make ``paths`` (and everything under them) the worker's again, every folder mode
    700: the next run of the same user, and every other user, reads nothing of them."""
    uid, gid = os.geteuid(), os.getegid()
    for top in paths:
        _own_tree(top, uid, gid, top_mode=0o700, dir_mode=0o700)


def _own_tree(
    top: str, uid: int, gid: int, top_mode: int | None = None, dir_mode: int | None = None
) -> None:
    """chown ``top`` and everything under it to ``uid``:``gid``, never through a link: the
    tree may be a run's, which could have put a symlink to ``/etc`` anywhere in it.
    ``os.fwalk`` holds each folder by a descriptor and never descends a link."""
    if not os.path.isdir(top) or os.path.islink(top):
        return
    for _root, dirs, files, fd in os.fwalk(top, follow_symlinks=False):
        os.fchown(fd, uid, gid)
        mode = top_mode if _root == top else dir_mode
        if mode is not None:
            os.fchmod(fd, mode)
        for name in dirs + files:
            try:
                os.chown(name, uid, gid, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue


# -- which processes a uid has -------------------------------------------------------------

_UID_LINE = re.compile(rb"^Uid:\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)", re.MULTILINE)
_STATE_LINE = re.compile(rb"^State:\s+(\S)", re.MULTILINE)


def processes_of(uid: int) -> list[int]:
    """The live processes (zombies aside) with ``uid`` as their real, effective, saved or
    filesystem user: what ``/proc/<pid>/status`` says, which a process cannot hide by
    making itself undumpable (that only changes who owns its ``/proc`` folder)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as handle:
                status = handle.read()
        except OSError:
            continue
        uids = _UID_LINE.search(status)
        state = _STATE_LINE.search(status)
        if uids is None or (state is not None and state.group(1) in (b"Z", b"X")):
            continue
        if uid in {int(value) for value in uids.groups()}:
            found.append(int(name))
    return found


def kill_processes_of(user: RunUser, timeout: float = 10.0) -> list[int]:
    """SIGKILL every process of ``user``'s, and wait until none is left; what was found.

    ``kill(-1)`` from a process of that user reaches all of them in one call in the
    kernel, so a run that forks faster than a scan of ``/proc`` could follow dies too.
    Only for a user no one else runs as: a pool user under its lease.
    """
    found = processes_of(user.uid)
    deadline = time.monotonic() + timeout
    while found:
        subprocess.run(
            ["/bin/sh", "-c", "kill -KILL -1"],
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
            preexec_fn=_drop_to(user.uid, user.gid),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        if not processes_of(user.uid):
            break
        if time.monotonic() > deadline:
            raise RunUserError(f"processes of run user {user.name!r} survive SIGKILL")
        time.sleep(0.05)
    return found


def _drop_to(uid: int, gid: int) -> Callable[[], None]:
    def drop() -> None:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)

    return drop


# -- leases ----------------------------------------------------------------------------------


class Lease:
    """A run attempt's hold on its run user; :meth:`end` gives the user back."""

    def __init__(self, user: RunUser, fd: int | None, on_end: Callable[[Lease], None]):
        self.user = user
        self._fd = fd
        self._on_end = on_end
        self._ended = False

    def end(self, paths: Iterable[str]) -> None:
        """The attempt is over: its user's leftover processes die (a pool user), ``paths``
        are taken back, and only then is the user free for another run. Once.

        Never raises: the run's end is still to be reported. A process that survives
        SIGKILL (stuck in a device driver) keeps its user from the next lease by itself;
        a folder that cannot be taken back keeps the lease held for this worker's life.
        """
        if self._ended:
            return
        self._ended = True
        paths = list(paths)
        try:
            self._on_end(self)
        except (OSError, RunUserError) as exc:
            log.error("run user %s: %s", self.user.name, exc)
        try:
            take_back(paths)
        except OSError as exc:
            log.error(
                "run user %s keeps its lease: cannot take back %s: %s",
                self.user.name,
                ", ".join(paths),
                exc,
            )
            return
        if self._fd is not None:
            os.close(self._fd)  # the kernel's lock goes with it


class RunUsers:
    """Who a root worker's runs execute as: one lease per run attempt."""

    # True: a lease's user is the run's alone (a pool); False: one user for every run.
    exclusive = False

    def __init__(self, users: Sequence[RunUser]):
        if not users:
            raise RunUserError("no run user")
        self.users = list(users)

    def lease(self, give_up: threading.Event | None = None) -> Lease:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def check_user(self, user: RunUser, python: str, work_dir: str) -> None:
        """:meth:`RunUser.check_can_run` for ``user``, as this kind of run users allows."""
        user.check_can_run(python, work_dir)

    def recover(self, work_dir: str) -> list[str]:
        """At start: take back every run folder under ``work_dir`` not the worker's (runs an
        earlier worker process left behind, a version that left them to the run user);
        the pool users those runs had lose their leftover processes. Returns the folders."""
        me = os.geteuid()
        runs = os.path.join(work_dir, "runs")
        taken: list[str] = []
        owners: set[int] = set()
        for name in sorted(os.listdir(runs)) if os.path.isdir(runs) else []:
            folder = os.path.join(runs, name)
            try:
                owner = os.lstat(folder).st_uid
            except OSError:
                continue
            if owner != me and os.path.isdir(folder) and not os.path.islink(folder):
                take_back([folder])
                taken.append(folder)
                owners.add(owner)
        self._clear(owners)
        return taken

    def _clear(self, uids: set[int]) -> None:
        """Kill what still runs as those of ``uids`` that are free pool users."""


class SharedRunUser(RunUsers):
    """``--run-user NAME``: every run executes as that one user (weaker: runs that live
    at once can read each other's directories and ``/proc``)."""

    def __init__(self, user: RunUser):
        super().__init__([user])

    def lease(self, give_up: threading.Event | None = None) -> Lease:
        return Lease(self.users[0], None, lambda lease: None)

    def describe(self) -> str:
        user = self.users[0]
        return f"{user.name} (groups {user.group_names()}), one user for every run"


POOL_PREFIX = "npulab-run-"
# Enough for an Ascend server's 8 NPUs; ``--users`` / NPULAB_RUN_USER_POOL for more.
DEFAULT_POOL_SIZE = 8
POOL_SIZE_ENV = "NPULAB_RUN_USER_POOL"
# Where leases are held: one file per pool user, locked (flock) by the worker whose run
# has it. Machine-wide, so that every host worker on the machine shares the pool.
LEASE_DIR = "/run/npulab-run-users"
# Beside the leases: held while a run user is made (:func:`ensure_user`).
USERADD_LOCK = "useradd.lock"
# How long an attempt waits for a free pool user (several workers sharing a small pool).
LEASE_WAIT_S = 120.0
# How long a worker's start-up check waits for a pool user another worker's run has: a
# run that is about to end, not one that may take hours (the user works for runs here).
PROBE_WAIT_S = 10.0


def pool_name(index: int) -> str:
    return f"{POOL_PREFIX}{index}"


def existing_pool() -> list[RunUser]:
    """The pool users this host has: ``npulab-run-0`` and up, while they exist."""
    users = []
    while True:
        try:
            users.append(RunUser(pool_name(len(users))))
        except RunUserError:
            return users


class RunUserPool(RunUsers):
    """One pool user per run attempt that lives, never two attempts on one user.

    A user is free when no worker on this machine holds its lease file's flock (the
    kernel drops it with the worker that held it, however it dies) and no process runs
    as it (an earlier worker's run that outlived it until that worker's restart kills
    it). Neither is this worker's memory: a restarted worker, or a second one on the
    machine, derives the same answer.
    """

    exclusive = True

    def __init__(self, users: Sequence[RunUser], lease_dir: str = LEASE_DIR):
        super().__init__(users)
        self.lease_dir = lease_dir
        self._by_uid = {user.uid: user for user in self.users}

    def describe(self) -> str:
        first, last = self.users[0], self.users[-1]
        return (
            f"a pool of {len(self.users)} users, one per run ({first.name} … {last.name}, "
            f"groups {first.group_names()})"
        )

    def _lock(self, user: RunUser) -> int | None:
        """The descriptor holding ``user``'s lease; None while another holds it."""
        os.makedirs(self.lease_dir, mode=0o700, exist_ok=True)
        path = os.path.join(self.lease_dir, f"{user.name}.lease")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return None
            raise
        return fd

    def _take(self, user: RunUser) -> Lease | None:
        """``user``'s lease, or None while it is not free."""
        fd = self._lock(user)
        if fd is None:
            return None
        if processes_of(user.uid):
            os.close(fd)  # an earlier run's processes: not free until they are gone
            return None
        return Lease(user, fd, self._end)

    def try_lease(self) -> Lease | None:
        """The first free user's lease, or None while every one is in use."""
        for user in self.users:
            lease = self._take(user)
            if lease is not None:
                return lease
        return None

    def lease(self, give_up: threading.Event | None = None) -> Lease:
        """A free user's lease, waiting for one while every one is in use (workers sharing
        the pool); RunUserError after LEASE_WAIT_S or when ``give_up`` is set."""
        give_up = give_up or threading.Event()
        deadline = time.monotonic() + LEASE_WAIT_S
        while True:
            lease = self.try_lease()
            if lease is not None:
                return lease
            if give_up.wait(0.5):
                raise RunUserError("the host worker is shutting down")
            if time.monotonic() > deadline:
                raise RunUserError(
                    f"no free run user: all {len(self.users)} of the pool are in use by "
                    f"runs or their leftover processes ({POOL_SIZE_ENV} sets its size)"
                )

    def check_user(self, user: RunUser, python: str, work_dir: str) -> None:
        """Check ``user`` under its lease, as a run would execute: the end of another
        worker's lease, or its start-up, kills every process of a user it holds or finds
        free, a probe included. A user another worker's run has is waited for up to
        PROBE_WAIT_S, then not checked now: that run shows it works on this host."""
        lease = self._take(user)
        if lease is None:
            log.debug(
                "run user %s is in use: waiting up to %g s to check it", user.name, PROBE_WAIT_S
            )
            deadline = time.monotonic() + PROBE_WAIT_S
            while lease is None and time.monotonic() < deadline:
                time.sleep(0.1)
                lease = self._take(user)
        if lease is None:
            log.info(
                "run user %s not checked now: another worker's run on this host executes as it",
                user.name,
            )
            return
        try:
            user.check_can_run(python, work_dir)
        finally:
            lease.end([])

    def _end(self, lease: Lease) -> None:
        left = kill_processes_of(lease.user)
        if left:
            log.warning(
                "run user %s: killed %d process(es) its run left behind",
                lease.user.name,
                len(left),
            )

    def _clear(self, uids: set[int]) -> None:
        for uid in sorted(uids):
            user = self._by_uid.get(uid)
            if user is None:
                continue
            fd = self._lock(user)
            if fd is None:
                continue  # another worker's run has it now: its processes are that run's
            try:
                left = kill_processes_of(user)
                if left:
                    log.warning(
                        "run user %s: killed %d process(es) an earlier run left behind",
                        user.name,
                        len(left),
                    )
            finally:
                os.close(fd)


# ``--run-user auto``: a root worker's runs execute as the pool's users, which ``make
# run``, deploy/'s unit and the e2e harness make; a worker that is not root cannot
# change user.
AUTO = "auto"
# The single run user of the versions before the pool: a worker.env that still names it
# gets the pool.
LEGACY_USER = "npulab-run"


def prepare_hint(size: int) -> str:
    return (
        f"python -m workers.host.runuser --users {size} PYTHON WORK_DIR (make run and the "
        "worker's systemd unit do it)"
    )


def choose(name: str | None, slots: int = 1, lease_dir: str = LEASE_DIR) -> RunUsers | None:
    """The run users the setting names, not yet checked; None for the worker's own user.

    ``auto`` (or the old ``npulab-run``) as root: the pool, with at least ``slots`` users
    (the runs this worker executes at once). RunUserError for an unknown user, a pool too
    small, and a root worker left without one: runs never execute as root.
    """
    if name in (AUTO, LEGACY_USER):
        if os.geteuid() != 0:
            return None
        pool = existing_pool()
        if len(pool) < slots:
            have = f"has {len(pool)} users" if pool else "is not made"
            raise RunUserError(
                f"the run-user pool {have}, this worker runs {slots} run(s) at once: "
                f"runs never execute as root; make it with {prepare_hint(max(slots, 1))}, "
                "or set --run-user / NPULAB_RUN_USER to one user (weaker: docs/security.md)"
            )
        return RunUserPool(pool, lease_dir)
    if not name:
        if os.geteuid() == 0:
            raise RunUserError(
                "runs never execute as root: set --run-user / NPULAB_RUN_USER to 'auto' "
                f"(the default: a pool of users, {POOL_PREFIX}0 and up) or to one user"
            )
        return None
    user = RunUser(name)
    if user.uid == 0:
        raise RunUserError(f"run user {name!r} is root: runs never execute as root")
    return SharedRunUser(user)


def check_can_run(users: RunUsers, python: str, work_dir: str) -> None:
    """RunUserError unless every one of ``users`` can run ``python`` on the host's paths
    (checked at once: each is a Python start-up; a pool user under its lease)."""
    with ThreadPoolExecutor(max_workers=min(8, len(users.users))) as executor:
        futures = [executor.submit(users.check_user, u, python, work_dir) for u in users.users]
        for future in futures:
            future.result()


def grant_traverse(user: str, paths: Iterable[str]) -> list[str]:
    """Let ``user`` through every folder above ``paths`` (search only, no listing), with an
    ACL entry where the folder does not let other users through already. The folder this
    package is imported from, where the walk passes it, is let be listed too: Python reads
    a folder on its path to find a module in it (a checkout cloned straight into a
    ``mktemp -d`` folder is mode 700).

    For a layout without the sandbox: the run user must reach the interpreter and the work
    directory on the host's own paths (a checkout under /root or in a ``mktemp -d`` folder).
    Returns the folders changed.
    """
    uid = pwd.getpwnam(user).pw_uid
    changed = []
    for path in paths:
        real = os.path.realpath(path)
        folder = real if os.path.isdir(real) else os.path.dirname(real)
        while True:
            needed = acl.READ | acl.SEARCH if folder == PACKAGE_ROOT else acl.SEARCH
            others = os.stat(folder).st_mode & 0o007
            if others & needed != needed and acl.user_permissions(folder, uid) & needed != needed:
                acl.allow(folder, uid, needed)
                changed.append(folder)
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
    return changed


@contextlib.contextmanager
def _users_locked() -> Iterator[None]:
    """Held while a user is looked up and made. Two host workers starting at once on a
    fresh machine both find a pool user missing, and the second ``useradd`` fails (exit
    9, the name is taken by then): the lookup and the ``useradd`` go together, one
    process at a time, machine-wide (the folder of the lease files)."""
    os.makedirs(LEASE_DIR, mode=0o700, exist_ok=True)
    fd = os.open(
        os.path.join(LEASE_DIR, USERADD_LOCK), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600
    )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def ensure_user(name: str, groups: Iterable[str] = ("HwHiAiUser",)) -> RunUser:
    """The run user, made first if missing: a system user with no home, no shell and no
    password, with a group of its own (so its files' group bits reach no other run
    user), in those of ``groups`` the host has (HwHiAiUser: the Ascend devices')."""
    try:
        return RunUser(name)
    except RunUserError:
        pass
    with _users_locked():
        return _make_user(name, groups)


def _make_user(name: str, groups: Iterable[str]) -> RunUser:
    try:
        return RunUser(name)  # made by another process while this one waited
    except RunUserError:
        pass
    present = []
    for group in groups:
        try:
            grp.getgrnam(group)
            present.append(group)
        except KeyError:
            continue
    command = ["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent"]
    command += ["--shell", "/usr/sbin/nologin", "--user-group"]
    if present:
        command += ["--groups", ",".join(present)]
    subprocess.run([*command, name], check=True, capture_output=True)
    return RunUser(name)


def ensure_pool(size: int, groups: Iterable[str] = ("HwHiAiUser",)) -> list[RunUser]:
    """The pool, its first ``size`` users made where missing (:func:`ensure_user`): every
    pool user the host has, which a worker uses (and checks) all of."""
    for index in range(size):
        ensure_user(pool_name(index), tuple(groups))
    return existing_pool()


def default_pool_size() -> int:
    """NPULAB_RUN_USER_POOL, else DEFAULT_POOL_SIZE or the host's device count
    (NPULAB_DEVICES) when larger."""
    value = os.environ.get(POOL_SIZE_ENV, "")
    if value:
        return int(value)
    devices = os.environ.get("NPULAB_DEVICES", "")
    return max(DEFAULT_POOL_SIZE, int(devices) if devices.isdigit() else 0)


def main(argv: list[str] | None = None) -> int:
    """``python -m workers.host.runuser [--users N | --user NAME] PATH...``: make the run
    users (``make run`` as root, the worker's systemd unit, the e2e harness) and let each
    through the folders above each PATH (the run interpreter, the work directory), for a
    host without the sandbox. Idempotent."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m workers.host.runuser")
    parser.add_argument(
        "--user",
        default="",
        help=f"one run user for every run (weaker); empty, 'auto' or '{LEGACY_USER}': the "
        "pool (NPULAB_RUN_USER in the unit)",
    )
    parser.add_argument(
        "--users",
        type=int,
        default=None,
        help=f"the pool's size: at least the runs the host's workers execute at once "
        f"(default: {POOL_SIZE_ENV}, else {DEFAULT_POOL_SIZE} or NPULAB_DEVICES if larger)",
    )
    parser.add_argument("paths", nargs="*")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("not root: runs execute as this user, no run user to prepare")
        return 0
    try:
        if args.user in ("", AUTO, LEGACY_USER):
            size = args.users if args.users is not None else default_pool_size()
            if size < 1:
                parser.error("--users must be at least 1")
            users = ensure_pool(size)
        else:
            users = [ensure_user(args.user)]
        changed = 0
        for user in users:
            changed += len(grant_traverse(user.name, args.paths))
    except (OSError, ValueError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        print(f"cannot prepare the run users: {exc} {detail.decode(errors='replace')}")
        return 1
    names = users[0].name if len(users) == 1 else f"{users[0].name} … {users[-1].name}"
    print(f"run users {names} ({len(users)}); search access granted on {changed} folders")
    return 0


if __name__ == "__main__":
    sys.exit(main())
