"""The host worker's side of a capability is made for the runs of kinds that declare it."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from tests.waiting import wait_until
from tests.workers.host.fakes import FakePlatform
from tests.workers.host.test_left import checkpoint_at, threads_of
from workers.contract import script_env
from workers.contract.capabilities import CHECKPOINTS, PINNED
from workers.contract.events import CHECKPOINT
from workers.host import capabilities
from workers.host.checkpoints import CheckpointsOnHost
from workers.track import checkpoint as checkpoints


def attempt(
    tmp_path: Path, claim: dict | None = None, platform: FakePlatform | None = None, **more: object
) -> capabilities.Attempt:
    run_dir = tmp_path / "runs" / "7" / "attempt-1"
    return capabilities.Attempt(
        platform or FakePlatform(), 7, 1, str(run_dir), str(run_dir.parent), claim or {}, **more
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


def test_a_shutdown_stops_a_waiting_checkpoint_upload_and_finish_says_so(tmp_path: Path) -> None:
    platform, shutting_down = FakePlatform(), threading.Event()
    platform.go_down("create_upload")
    hooks = CheckpointsOnHost(attempt(tmp_path, platform=platform, give_up=shutting_down))
    checkpoint_at(tmp_path, 5)
    hooks.acknowledged([{"type": CHECKPOINT, "step": 5}], {})
    wait_until(lambda: platform.failed["create_upload"] >= 1, "a try to upload the checkpoint")

    shutting_down.set()

    # Before the run's end (its events not all stored): the upload stops by itself.
    wait_until(lambda: not threads_of(7), "the checkpoint upload to stop", timeout=60)
    # At the end: not finished, the next worker start sends it.
    assert hooks.finish() is False
    assert not checkpoints.settled(hooks.directory, 5)
