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
from typing import Callable, Iterable

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


# ``--run-user auto``: an unprivileged user when the worker is root and that user can run
# the interpreter (``make run`` as root), else the worker's own user, with a warning.
AUTO = "auto"
AUTO_USER = "nobody"


def resolve(name: str | None, python: str, work_dir: str) -> RunUser | None:
    """The run user the setting names, checked; None for "the worker's own user".

    RunUserError for a named user that cannot be used; ``auto`` falls back instead
    (``log`` says why).
    """
    if not name:
        return None
    if name == AUTO:
        if os.geteuid() != 0:
            return None
        try:
            user = RunUser(AUTO_USER)
            user.check_can_run(python, work_dir)
        except RunUserError as exc:
            log.warning("runs execute as root: %s", exc)
            return None
        return user
    user = RunUser(name)
    user.check_can_run(python, work_dir)
    return user
