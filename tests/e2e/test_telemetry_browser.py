"""Telemetry end to end: the real host worker samples and sends, the host page draws it."""

from __future__ import annotations

import pytest

from harness.stack import HOST, Platform
from tests.e2e.screenshots import shoot

pytestmark = [pytest.mark.e2e, pytest.mark.browser]
WAIT_MS = 120_000


def test_the_host_page_draws_the_workers_telemetry_and_switches_windows(
    platform: Platform, browser
) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1100})
    platform.log_in(page)
    # The worker samples every 10 s: wait for its samples (the page is static, so reload).
    page.goto(f"{platform.url}/hosts/{HOST}/")
    page.wait_for_function(
        """async () => {
            const response = await fetch(location.pathname);
            const text = await response.text();
            return !text.includes("no telemetry") && text.includes("sampled ");
        }""",
        timeout=WAIT_MS,
        polling=2000,
    )
    page.reload()
    health = page.locator("#device-table tbody tr").first.locator(".device-health .badge")
    assert health.inner_text() in ("OK", "UNKNOWN", "WARNING", "ALARM", "CRITICAL")

    # The default window is drawn once its fragment settles: at least one chart, one line.
    page.wait_for_selector('.telemetry-charts[data-window="6h"][data-drawn="1"]', timeout=WAIT_MS)
    assert page.locator(".telemetry-chart-card canvas").count() >= 1
    assert page.locator("#telemetry-windows .btn-primary").inner_text() == "6h"
    shoot(page, platform.var_dir, "host-telemetry")

    # Another window: the buttons reload the panel over htmx and the charts are drawn again.
    page.click('#telemetry-windows button[data-window="24h"]')
    page.wait_for_selector('.telemetry-charts[data-window="24h"][data-drawn="1"]', timeout=WAIT_MS)
    assert page.locator("#telemetry-windows .btn-primary").inner_text() == "24h"
    assert page.locator('.telemetry-charts[data-window="6h"]').count() == 0
    assert page.locator('.telemetry-charts[data-window="24h"]').get_attribute("data-source") == (
        "rollups"
    )
    page.click('#telemetry-windows button[data-window="1h"]')
    page.wait_for_selector('.telemetry-charts[data-window="1h"][data-drawn="1"] canvas')
    assert page.locator('.telemetry-charts[data-window="1h"]').get_attribute("data-source") == "raw"
