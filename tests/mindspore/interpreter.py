"""The MindSpore interpreter of the tests: `make mindspore`'s, or NPULAB_TEST_MINDSPORE_PYTHON.

Without one the tests that need it are skipped, except under CI=true (`make test`
prepares it first), where that is a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.services import in_ci
from tests.paths import REPO_DIR

SCRIPT = Path(__file__).with_name("train_tiny.py")
# Data parallel under msrun: each worker its shard, the gradients averaged.
PARALLEL_SCRIPT = Path(__file__).with_name("train_parallel.py")


def mindspore_python() -> str:
    """The interpreter's path, whether or not it is there."""
    return os.environ.get("NPULAB_TEST_MINDSPORE_PYTHON") or str(
        REPO_DIR / ".venv-mindspore" / "bin" / "python"
    )


def has_mindspore() -> bool:
    return os.access(mindspore_python(), os.X_OK)


def require_mindspore() -> str:
    python = mindspore_python()
    if not has_mindspore():
        reason = f"no MindSpore interpreter at {python} (make mindspore)"
        if in_ci():
            pytest.fail(f"CI=true: {reason}")
        pytest.skip(reason)
    return python
