"""The end-to-end platform fixture (tests/e2e/platform.py) on the services the tests use."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from django.conf import settings

from tests.e2e.platform import CHROMIUM_ARGS, Platform, chromium_path, launched_platform
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


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """Debian's Chromium driven by Playwright (its own browser download fails here)."""
    executable = chromium_path()
    require(executable is not None, "no chromium on PATH (Debian: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield browser
        browser.close()
