"""The run page's Profiles card in headless Chromium: a captured profile's summary, and a
trace made elsewhere imported through its form."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from harness.stack import Platform
from tests.e2e.accessibility import assert_leads_with
from tests.e2e.screenshots import shoot

pytestmark = [pytest.mark.e2e, pytest.mark.browser]
WAIT_MS = 120_000


def test_the_profiles_card_shows_a_ready_profile_and_imports_a_trace(
    platform: Platform, browser, tmp_path: Path
) -> None:
    run_id = platform.submit(
        matmul_size=128, train_steps=10, profile={"wait": 1, "warmup": 1, "active": 2}
    )["id"]
    run = platform.wait(run_id)
    assert run["status"] == "succeeded", platform.tail()
    page = browser.new_page(viewport={"width": 1280, "height": 1400})
    platform.log_in(page)
    page.goto(f"{platform.url}/runs/{run_id}/")

    # Summarised after the run ended: the card polls until it is ready.
    page.wait_for_selector("#profiles tr[data-status='ready']", timeout=WAIT_MS)
    row = page.locator("#profiles tr[data-status='ready']")
    assert "trace-1.json.gz" in row.inner_text()
    assert row.locator("a", has_text="timeline").count() == 1
    assert page.locator("#profiles [hx-trigger]").count() == 0
    shoot(page, platform.var_dir, "run-profiles")
    # Once summarised, the page leads with the profile's top findings.
    page.reload()
    assert page.locator("#profile-headline").get_attribute("data-profile") == row.get_attribute(
        "data-profile"
    )
    assert_leads_with(page, "#profile-headline", platform.var_dir, "pages-profiled-run")

    # A trace from elsewhere: the one just captured, as a plain .json.
    download = platform.api("GET", f"profiles/{row.get_attribute('data-profile')}/download/")
    trace = tmp_path / "from_gpu.json"
    trace.write_bytes(gzip.decompress(download.content))
    page.set_input_files("#profile-file", str(trace))
    page.click("#profile-import button[type=submit]")
    page.wait_for_selector(".alert-success.alert-dismissible", timeout=WAIT_MS)
    assert (
        "Imported from_gpu.json.gz" in page.locator(".alert-success.alert-dismissible").inner_text()
    )
    page.wait_for_selector(
        "#profiles tr[data-status='ready'] >> text=from_gpu.json.gz", timeout=WAIT_MS
    )
    assert page.locator("#profiles tr[data-profile]").count() == 2
    shoot(page, platform.var_dir, "run-profiles-imported")
    page.screenshot(path=str(tmp_path.parent / "profiles-card.png"), full_page=True)
