"""Fixtures of the MindSpore tests."""

from __future__ import annotations

import pytest

from tests.mindspore.interpreter import require_mindspore


@pytest.fixture(scope="session")
def ms_python() -> str:
    return require_mindspore()
