"""Draining a host on its page in headless Chromium: a run waits, then goes once undrained."""

from __future__ import annotations

import time

import pytest

from harness.polling import pauses
from harness.stack import HOST, Platform
from tests.reliability.stacks import ECHO_RUN

pytestmark = [pytest.mark.e2e, pytest.mark.browser]
NOTE = "swapping the fan tray"


def wait_for_reason(platform: Platform, run_id: int, text: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    pause = pauses()
    while True:
        run = platform.run(run_id)
        if text in run["queue_reason"]:
            return run
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} never said {text!r}: {run}\n{platform.tail()}")
        time.sleep(next(pause))


def test_drain_the_host_on_its_page_a_run_waits_and_goes_once_undrained(
    platform: Platform, browser
) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    platform.log_in(page)
    page.goto(f"{platform.url}/hosts/{HOST}/")
    page.wait_for_selector("#drain-form")
    try:
        page.fill("#drain-form input[name=note]", NOTE)
        page.click("#drain-form button[type=submit]")
        page.wait_for_selector('#host-health [data-health="drained"]')
        assert NOTE in page.locator("#drain-note").inner_text()
        assert page.locator("#undrain-form").count() == 1

        # Any run waits on a drained host: an echo run imports no torch.
        run_id = platform.submit(**ECHO_RUN, host=HOST)["id"]
        run = wait_for_reason(platform, run_id, f"is drained: {NOTE}")
        assert run["status"] == "queued"
        page.screenshot(path=str(platform.var_dir / "host-drained.png"), full_page=True)

        page.click("#undrain-form button[type=submit]")
        page.wait_for_selector('#host-health [data-health]:not([data-health="drained"])')
        assert platform.wait(run_id)["status"] == "succeeded"
        page.goto(f"{platform.url}/hosts/{HOST}/")
        changes = page.locator("#health-changes").text_content()
        assert "drained" in changes
        assert NOTE in changes
    finally:
        # The platform is shared by the session's other tests: leave the host as it was.
        page.goto(f"{platform.url}/hosts/{HOST}/")
        if page.locator("#undrain-form").count():
            page.click("#undrain-form button[type=submit]")
            page.wait_for_selector("#drain-form")
        page.close()
