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


def require_mindspore() -> str:
    python = os.environ.get("NPULAB_TEST_MINDSPORE_PYTHON") or str(
        REPO_DIR / ".venv-mindspore" / "bin" / "python"
    )
    if not os.access(python, os.X_OK):
        reason = f"no MindSpore interpreter at {python} (make mindspore)"
        if in_ci():
            pytest.fail(f"CI=true: {reason}")
        pytest.skip(reason)
    return python
