"""The end-to-end platform fixture (tests/e2e/platform.py) on the services the tests use."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from django.conf import settings

from tests.e2e.platform import Platform, launched_platform
from tests.services import in_ci


@pytest.fixture(scope="session")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    # The tests' Redis db (15) is theirs alone: flushed of the queues of earlier runs.
    with launched_platform(
        settings.SERVICES,
        tmp_path_factory.mktemp("e2e"),
        database=f"npulab_e2e_{os.getpid()}",
        flush_redis=True,
    ) as platform:
        yield platform


def require(condition: bool, reason: str) -> None:
    """Skip for a missing tool or service, except under CI=true, where it is a failure."""
    if condition:
        return
    if in_ci():
        pytest.fail(f"CI=true: {reason}")
    pytest.skip(reason)
