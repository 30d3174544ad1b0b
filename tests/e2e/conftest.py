"""The end-to-end platform fixture (harness/stack.py) on the services the tests use."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.services import in_ci
from harness.stack import CHROMIUM_ARGS, Platform, chromium_path
from tests.e2e.shared import SHARED_PLATFORM, SharedPlatform

ASYNC_UNSAFE = "DJANGO_ALLOW_ASYNC_UNSAFE"
# Playwright waits 30 s by default; a loaded 2-core machine (a CI runner, a second test
# session) can take longer to draw a page, and a wait that gives up early is a false alarm.
DEFAULT_WAIT_MS = 120_000


@pytest.fixture(scope="session")
def shared_platform(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SharedPlatform]:
    shared = SharedPlatform(tmp_path_factory)
    request.config.stash[SHARED_PLATFORM] = shared
    yield shared
    shared.stop()


@pytest.fixture(scope="module")
def platform(shared_platform: SharedPlatform) -> Platform:
    """The stack the end-to-end tests share (tests/e2e/shared.py)."""
    return shared_platform.get()


ACTIVE = ("queued", "dispatched", "running")


@pytest.fixture(scope="session")
def scripts_dir() -> Iterator[Path]:
    """A folder for the tests' own scripts that a run can read: runs execute as the run user
    (npulab-run) when the tests run as root, and pytest's tmp_path is the tester's alone."""
    folder = Path(tempfile.mkdtemp(prefix="npulab-e2e-scripts-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def write_script(folder: Path, name: str, text: str) -> Path:
    """``text`` as ``folder``/``name``, readable by every user."""
    path = folder / name
    path.write_text(text)
    path.chmod(0o644)
    return path


@pytest.fixture(autouse=True)
def _no_run_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that fails half-way leaves its runs behind, holding the shared platform's
    devices: they are cancelled, so the next test does not fail by waiting for them."""
    yield
    if "platform" not in request.fixturenames:
        return
    platform = request.getfixturevalue("platform")
    left = [
        run["id"]
        for state in ACTIVE
        for run in platform.api("GET", f"runs/?status={state}&page_size=200").json()["results"]
    ]
    for run_id in left:
        platform.api("POST", f"runs/{run_id}/cancel/")
    for run_id in left:
        platform.wait(run_id)


def require(condition: bool, reason: str) -> None:
    """Skip for a missing tool or service, except under CI=true, where it is a failure."""
    if condition:
        return
    if in_ci():
        pytest.fail(f"CI=true: {reason}")
    pytest.skip(reason)


class PagesBrowser:
    """The browser for tests of what pages do, not of their Content-Security-Policy.

    Playwright's waits given as strings (``wait_for_function("...")``) are evaluated in the
    page, which the policy refuses as eval; these contexts bypass it. The policy itself is
    tested with ``bypass_csp=False`` (tests/e2e/test_csp_browser.py). Every wait has a
    generous default deadline.
    """

    def __init__(self, browser: Any) -> None:
        self._browser = browser

    def new_context(self, **options: Any) -> Any:
        options.setdefault("bypass_csp", True)
        context = self._browser.new_context(**options)
        context.set_default_timeout(DEFAULT_WAIT_MS)
        return context

    def new_page(self, **options: Any) -> Any:
        options.setdefault("bypass_csp", True)
        page = self._browser.new_page(**options)
        page.set_default_timeout(DEFAULT_WAIT_MS)
        return page

    def __getattr__(self, name: str) -> Any:
        return getattr(self._browser, name)


@pytest.fixture(scope="session")
def browser() -> Iterator[PagesBrowser]:
    """Debian's Chromium driven by Playwright (its own browser download fails here)."""
    executable = chromium_path()
    require(executable is not None, "no chromium on PATH (Debian: apt-get install chromium)")
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=DEFAULT_WAIT_MS)

    # Playwright's sync API keeps an asyncio loop in this thread from here on, which Django
    # takes for async code: the test database work in this process (a live server's tests,
    # and every test after them) is plain synchronous code.
    before = os.environ.get(ASYNC_UNSAFE)
    os.environ[ASYNC_UNSAFE] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
            yield PagesBrowser(browser)
            browser.close()
    finally:
        if before is None:
            os.environ.pop(ASYNC_UNSAFE, None)
        else:
            os.environ[ASYNC_UNSAFE] = before
