"""A pytest plugin that says where the suite's CPU goes: per test, the wall time and the CPU
of the whole process tree that the test's pytest process started (stacks, runs, browsers).

Each pytest process (every pytest-xdist worker, the fuzzing's) moves itself into a cgroup
v1 cpuacct group of its own, which its children join as they start and which counts them
whoever reaps them; a test's CPU is the group's usage across it, so a shared stack's idle
ticks land on whichever test is running then, as they cost. Needs root and cgroup v1's
cpuacct controller. PostgreSQL's and Redis's servers are not children and not counted.

    PYTEST_ADDOPTS="-p harness.cputime" NPULAB_CPUTIME_DIR=/tmp/cpu make test

writes ``NPULAB_CPUTIME_DIR/<worker>.tsv``: node id, wall seconds, CPU seconds (docs/ci.md).
The groups (``npulab-tests-<pid>-<worker>``) stay behind, empty: ``rmdir`` them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import pytest

CGROUPS = Path("/sys/fs/cgroup/cpuacct")
OUT_ENV = "NPULAB_CPUTIME_DIR"


class _Meter:
    def __init__(self, group: Path, out: TextIO) -> None:
        self.group = group
        self.out = out

    def used_s(self) -> float:
        return int((self.group / "cpuacct.usage").read_text()) / 1e9


_METER = pytest.StashKey[_Meter]()


def pytest_configure(config: pytest.Config) -> None:
    folder = os.environ.get(OUT_ENV)
    if not folder:
        raise pytest.UsageError(f"harness.cputime: set {OUT_ENV} to a folder for its tables")
    if not CGROUPS.is_dir():
        raise pytest.UsageError(f"harness.cputime: no cgroup v1 cpuacct at {CGROUPS}")
    name = os.environ.get("PYTEST_XDIST_WORKER", "main")
    group = CGROUPS / f"npulab-tests-{os.getpid()}-{name}"
    group.mkdir(exist_ok=True)
    (group / "cgroup.procs").write_text(str(os.getpid()))
    Path(folder).mkdir(parents=True, exist_ok=True)
    config.stash[_METER] = _Meter(group, open(Path(folder) / f"{name}.tsv", "a"))  # noqa: SIM115


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    meter = item.config.stash[_METER]
    cpu, wall = meter.used_s(), time.monotonic()
    try:
        return (yield)
    finally:
        meter.out.write(
            f"{item.nodeid}\t{time.monotonic() - wall:.2f}\t{meter.used_s() - cpu:.2f}\n"
        )
        meter.out.flush()


def pytest_unconfigure(config: pytest.Config) -> None:
    meter = config.stash.get(_METER, None)
    if meter is not None:
        meter.out.close()
