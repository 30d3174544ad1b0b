"""The host worker's side of a capability is made for the runs of kinds that declare it."""

from __future__ import annotations

import os
from pathlib import Path

from tests.workers.host.fakes import FakePlatform
from workers.contract import script_env
from workers.contract.capabilities import CHECKPOINTS, PINNED
from workers.contract.events import CHECKPOINT
from workers.host import capabilities
from workers.host.checkpoints import CheckpointsOnHost
from workers.track import checkpoint as checkpoints


def attempt(tmp_path: Path, claim: dict | None = None) -> capabilities.Attempt:
    run_dir = tmp_path / "runs" / "7" / "attempt-1"
    return capabilities.Attempt(
        FakePlatform(), 7, 1, str(run_dir), str(run_dir.parent), claim or {}
    )


def test_only_kinds_that_declare_checkpoints_get_their_host_side() -> None:
    assert capabilities.for_kind("training") == [CheckpointsOnHost]
    assert capabilities.for_kind("smoke") == []
    assert capabilities.for_kind("no such kind") == []
    assert CheckpointsOnHost.name == CHECKPOINTS


def test_the_checkpoint_directory_is_shared_by_the_runs_attempts_and_named_to_the_run(
    tmp_path: Path,
) -> None:
    hooks = CheckpointsOnHost(attempt(tmp_path))
    shared = str(tmp_path / "runs" / "7" / "checkpoints")
    assert hooks.directories() == [shared]
    assert hooks.env() == {script_env.CHECKPOINT_DIR: shared}
    assert hooks.acted_on == (CHECKPOINT,)


def test_the_pins_of_the_platforms_reply_are_kept_on_the_host(tmp_path: Path) -> None:
    hooks = CheckpointsOnHost(attempt(tmp_path))
    os.makedirs(hooks.directory)  # as the worker makes it before the run starts
    hooks.acknowledged([], {PINNED: [100, 300]})
    assert checkpoints.pinned(hooks.directory) == {100, 300}
    # A reply without pins (a platform that predates them) changes nothing.
    hooks.acknowledged([], {})
    assert checkpoints.pinned(hooks.directory) == {100, 300}
