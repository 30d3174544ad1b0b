"""A live run in headless Chromium: its progress, its charts, its whole log, cancel's warning."""

from __future__ import annotations

import re

import pytest

from harness.stack import HOST, Platform
from tests.e2e.screenshots import shoot

pytestmark = [pytest.mark.e2e, pytest.mark.browser]
# More steps than the test waits for (it cancels the run), few enough for an ETA under an
# hour, which the page shows to the second.
STEPS = 50_000
WAIT_MS = 120_000


def test_a_live_training_run_shows_its_progress_log_and_what_cancel_loses(
    platform: Platform, browser
) -> None:
    run_id = platform.submit(
        kind="training", entry="builtin:cnn", max_steps=STEPS, checkpoint_every_steps=200
    )["id"]
    page = browser.new_page(viewport={"width": 1280, "height": 1100})
    platform.log_in(page)
    page.goto(f"{platform.url}/runs/{run_id}/")

    # "Step N of M" with a speed and an ETA, and both move on while the page refreshes itself.
    page.wait_for_selector("#progress-text #eta", timeout=WAIT_MS)
    text = page.locator("#progress-text").inner_text()
    assert re.fullmatch(rf"Step \d+ of {STEPS} · [\d.]+ steps/s · ETA .+", text), text
    first_step = int(page.locator("#progress").get_attribute("data-step"))
    first_eta = page.locator("#eta").inner_text()
    page.wait_for_function(
        "([step, eta]) => Number(document.querySelector('#progress').dataset.step) > step"
        " && document.querySelector('#eta') !== null"
        " && document.querySelector('#eta').textContent !== eta",
        arg=[first_step, first_eta],
        timeout=WAIT_MS,
    )

    # The charts follow the metric list's order (loss first) and the placeholder is gone.
    page.wait_for_selector("#metric-charts[data-ready='1'] .metric-chart[data-key='loss']")
    titles = page.locator("#metric-charts .metric-chart-card > div:first-child").all_inner_texts()
    assert titles[0] == "loss"
    listed = page.locator("#metric-list").inner_text().removeprefix("metrics: ").split(", ")
    assert titles == listed
    assert page.locator("#no-metrics").is_hidden()
    shoot(page, platform.var_dir, "live-progress")

    # The whole log of the attempt, searched.
    page.click("#full-log-link")
    page.wait_for_url(re.compile(rf".*/runs/{run_id}/log/$"))
    assert "Attempt 1:" in page.locator("#log-summary").inner_text()
    page.fill("#log-search input[name=q]", "BUILTIN:CNN")
    page.click("#log-search button[type=submit]")
    page.wait_for_url(re.compile(r".*q=BUILTIN%3ACNN.*"))
    hits = page.locator("#log-lines > div").all_inner_texts()
    assert hits
    assert all("builtin:cnn" in hit.lower() for hit in hits), hits
    assert any(f"builtin:cnn: steps 0..{STEPS - 1}" in hit for hit in hits), hits
    summary = page.locator("#log-summary").inner_text()
    assert summary.startswith(f"{len(hits)} line{'s' if len(hits) > 1 else ''} of attempt 1")
    shoot(page, platform.var_dir, "live-log-search")
    download = page.locator("#log-download").get_attribute("href")
    assert download == f"/runs/{run_id}/log.txt?attempt=1&q=BUILTIN%3ACNN"
    assert page.request.get(f"{platform.url}{download}").text().count("\n") == len(hits)

    # Cancel asks first, saying what is lost, and the flash of the request goes once it is done.
    run_url = f"{platform.url}/runs/{run_id}/"
    page.goto(run_url)
    page.wait_for_selector("#checkpoints [data-step]", timeout=WAIT_MS)
    # The checkpoints panel and the live part with the cancel form refresh on their own
    # polls: the form may still carry the warning from before the checkpoint for a second.
    page.wait_for_selector(
        '#cancel-form[hx-confirm*="since the checkpoint of step"]', timeout=WAIT_MS
    )
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    with page.expect_response(
        lambda response: response.request.is_navigation_request() and response.url == run_url,
        timeout=WAIT_MS,
    ) as reloaded:
        page.click("#cancel-form button[type=submit]")
    page.wait_for_selector('#run-live[data-status="cancelled"]', timeout=WAIT_MS)
    assert re.fullmatch(
        rf"Cancel run #{run_id}\? The .+ of work since the checkpoint of step \d+ will be "
        "lost; a restart goes on from that checkpoint.",
        asked[0],
    ), asked
    # The cancel reloads the page with its flash. Drawn while the run still ran, the page
    # drops the flash when the run ends; drawn after (the host was quicker than the
    # reload), it shows it once, as any flash, and has nothing left to poll.
    drawn = re.search(r'id="run-live"[^>]*data-status="(\w+)"', reloaded.value.text())
    assert drawn, reloaded.value.text()[:2000]
    if drawn[1] == "cancelled":
        assert f"Cancel of run #{run_id} requested." in page.locator("main > .alert").inner_text()
    else:
        page.wait_for_function("document.querySelectorAll('main > .alert').length === 0")
    shoot(page, platform.var_dir, "live-cancelled")
    page.close()


def test_a_finished_smoke_run_has_no_stale_parts(platform: Platform, browser) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 1100})
    platform.log_in(page)
    page.goto(f"{platform.url}/runs/new/?kind=smoke")
    page.select_option("#id_host", HOST)
    page.fill("#id_matmul_size", "256")
    page.fill("#id_train_steps", "30")
    page.click("#submit-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    page.wait_for_selector('#run-live[data-status="succeeded"]', timeout=WAIT_MS)
    # "Run #N queued." went with the status it described.
    page.wait_for_function("document.querySelectorAll('main > .alert').length === 0")
    page.wait_for_selector("#metric-charts[data-ready='1'] .metric-chart[data-single='1']")
    titles = page.locator("#metric-charts .metric-chart-card > div:first-child").all_inner_texts()
    assert titles[0] == "train/loss"
    single = page.locator(".metric-chart[data-key='matmul/gflops']")
    assert re.fullmatch(r"[\d.]+ at step 0", single.inner_text().strip())
    assert page.locator("#no-metrics").is_hidden()
    shoot(page, platform.var_dir, "live-smoke-finished")
    page.close()
