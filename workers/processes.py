"""Process groups a run started, recorded in its run directory so anyone can stop them.

The runner's child may start work in process groups of its own (a training
launcher and its ranks). Whoever stops the run (the runner at its timeout,
the host worker on cancel or at start-up) kills the groups listed here too,
so nothing keeps running on a device the platform hands to another run.
"""

from __future__ import annotations

import contextlib
import os
import signal

GROUPS_FILE = "process-groups"


def register_group(run_dir: str, pgid: int) -> None:
    with open(os.path.join(run_dir, GROUPS_FILE), "a", encoding="ascii") as handle:
        handle.write(f"{pgid}\n")


def registered_groups(run_dir: str) -> list[int]:
    try:
        with open(os.path.join(run_dir, GROUPS_FILE), encoding="ascii") as handle:
            return [int(line) for line in handle if line.strip().isdigit()]
    except OSError:
        return []


def kill_group(pgid: int, signum: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def kill_registered(run_dir: str, signum: int = signal.SIGKILL) -> None:
    for pgid in registered_groups(run_dir):
        kill_group(pgid, signum)
