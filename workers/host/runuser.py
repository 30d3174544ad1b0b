"""The unprivileged user runs execute as, so a submitted run cannot read what the worker can.

The host worker (often root on an accelerator host, to reach the devices' tools) gives
each run's directories to the run user and starts the run's supervisor as that user,
with its groups (on Ascend hosts, HwHiAiUser: the devices' group). The worker's token
file, the platform's secret key and database stay readable by the worker only.
"""

from __future__ import annotations

import grp
import logging
import os
import pwd
import subprocess
import sys
from typing import Callable, Iterable

from workers.host import acl

log = logging.getLogger(__name__)


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
        """Make ``paths`` (and everything under them) the run user's."""
        for top in paths:
            os.chown(top, self.uid, self.gid)
            for root, dirs, files in os.walk(top):
                for name in dirs + files:
                    os.lchown(os.path.join(root, name), self.uid, self.gid)

    def check_can_run(self, python: str, work_dir: str, timeout: float = 60.0) -> None:
        """RunUserError unless this user can start ``python``, import the runner and reach
        ``work_dir`` (every folder above it must let the user through)."""
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        probe = f"import os, workers.run; os.stat({work_dir!r})"
        try:
            result = subprocess.run(
                [python, "-c", probe],
                cwd="/",
                env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": package_root},
                preexec_fn=self.become(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise RunUserError(f"run user {self.name!r} cannot start {python}: {exc}") from None
        if result.returncode != 0:
            last = (result.stderr.decode("utf-8", "replace").strip().splitlines() or ["?"])[-1]
            raise RunUserError(
                f"run user {self.name!r} cannot run {python} with this package "
                f"({package_root}) and work directory ({work_dir}): {last}"
            )


# ``--run-user auto``: a root worker's runs execute as the dedicated user ``make run`` and
# deploy/ make, else as nobody; a worker that is not root cannot change user.
AUTO = "auto"
AUTO_USERS = ("npulab-run", "nobody")
DEDICATED_USER = AUTO_USERS[0]


def choose(name: str | None) -> RunUser | None:
    """The run user the setting names, not yet checked; None for the worker's own user.

    RunUserError for an unknown user, and for a root worker left without one: runs never
    execute as root.
    """
    if name == AUTO:
        if os.geteuid() != 0:
            return None
        for candidate in AUTO_USERS:
            try:
                return RunUser(candidate)
            except RunUserError:
                continue
        raise RunUserError(
            f"no run user: runs never execute as root; create {DEDICATED_USER!r} "
            "(make run does) or set --run-user / NPULAB_RUN_USER"
        )
    if not name:
        if os.geteuid() == 0:
            raise RunUserError(
                "runs never execute as root: set --run-user / NPULAB_RUN_USER to an "
                f"unprivileged user (or 'auto', the default: {DEDICATED_USER} or nobody)"
            )
        return None
    user = RunUser(name)
    if user.uid == 0:
        raise RunUserError(f"run user {name!r} is root: runs never execute as root")
    return user


def grant_traverse(user: str, paths: Iterable[str]) -> list[str]:
    """Let ``user`` through every folder above ``paths`` (search only, no listing), with an
    ACL entry where the folder does not let other users through already.

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
            if not os.stat(folder).st_mode & 0o001 and not acl.user_permissions(folder, uid):
                acl.allow_search(folder, uid)
                changed.append(folder)
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
    return changed


def revoke_traverse(user: str, folders: Iterable[str]) -> None:
    """Undo :func:`grant_traverse` on the folders it returned."""
    uid = pwd.getpwnam(user).pw_uid
    for folder in folders:
        if os.path.isdir(folder):
            acl.remove_user(folder, uid)


def ensure_user(name: str, groups: Iterable[str] = ("HwHiAiUser",)) -> RunUser:
    """The run user, made first if missing: a system user with no home, no shell and no
    password, in those of ``groups`` the host has (HwHiAiUser: the Ascend devices')."""
    try:
        return RunUser(name)
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


def main(argv: list[str] | None = None) -> int:
    """``python -m workers.host.runuser [--user NAME] PATH...``: make the run user (``make run`` as
    root, the worker's systemd unit) and let it through the folders above each PATH (the
    run interpreter, the work directory), for a host without the sandbox."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m workers.host.runuser")
    parser.add_argument(
        "--user",
        default="",
        help=f"the run user (empty or 'auto': {DEDICATED_USER}); NPULAB_RUN_USER in the unit",
    )
    parser.add_argument("paths", nargs="*")
    args = parser.parse_args(argv)
    args.name = args.user if args.user not in ("", AUTO) else DEDICATED_USER
    if os.geteuid() != 0:
        print("not root: runs execute as this user, no run user to prepare")
        return 0
    try:
        user = ensure_user(args.name)
        changed = grant_traverse(user.name, args.paths)
    except (OSError, ValueError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        print(f"cannot prepare run user {args.name!r}: {exc} {detail.decode(errors='replace')}")
        return 1
    print(f"run user {user.name} (uid {user.uid}); search access granted on {len(changed)} folders")
    return 0


if __name__ == "__main__":
    sys.exit(main())
