"""deploy/env.example lists every variable npulab reads."""

from __future__ import annotations

import re

from tests.paths import REPO_DIR

# Set by npulab for a run's processes, not read as configuration.
SET_FOR_RUNS = {
    "NPULAB_RUN_DIR",
    "NPULAB_RUN_ID",
    "NPULAB_ATTEMPT",
    "NPULAB_CHECKPOINT_DIR",
    "NPULAB_PRECISION",
    "NPULAB_MAX_STEPS",
    "NPULAB_SEED",
    "NPULAB_KEEP_CHECKPOINTS",
    "NPULAB_CHECKPOINT_EVERY_STEPS",
    "NPULAB_CHECKPOINT_EVERY_MINUTES",
    # The spec's profiling window, for workers.track's run.profile_step().
    "NPULAB_PROFILE",
    # The run directory's owner lock, handed from the supervisor to its child.
    "NPULAB_OWNER_LOCK_FD",
    # A script's own checkpoint files, and the one restored for it (docs/mindspore.md).
    "NPULAB_CHECKPOINT_FILES",
    "NPULAB_RESUME_CHECKPOINT",
    # The framework and a MindSpore run's settings, for workers.training.launch.
    "NPULAB_FRAMEWORK",
    "NPULAB_MS_MODE",
    "NPULAB_MS_DEVICE_TARGET",
    "NPULAB_MS_AMP_LEVEL",
    "NPULAB_MS_LOSS_SCALE_MANAGER",
}


def test_every_variable_read_is_documented() -> None:
    names: set[str] = set()
    for path in [
        *REPO_DIR.joinpath("platform").rglob("*.py"),
        *REPO_DIR.joinpath("workers").rglob("*.py"),
    ]:
        names |= set(
            re.findall(r'"((?:NPULAB_[A-Z0-9_]+)|DATABASE_URL|PORT|BIND)"', path.read_text())
        )
    documented = set(
        re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", (REPO_DIR / "deploy/env.example").read_text(), re.M)
    )
    assert names - SET_FOR_RUNS - documented == set()
