"""The browser flow in real headless Chromium (Debian's package, driven by Playwright)."""

from __future__ import annotations

import copy
import re

import pytest
import requests

from harness.stack import HOST, PASSWORD, USER, Platform

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


def test_log_in_submit_a_smoke_run_and_watch_it_succeed(platform: Platform, browser) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{platform.url}/")
    assert "/login/" in page.url
    page.fill("#id_username", USER)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{platform.url}/")
    assert page.locator("#host-table").inner_text().count("e2e-cpu") == 1

    page.click("text=Submit run")
    page.wait_for_url(re.compile(r".*/runs/new/$"))
    page.select_option("#id_host", "e2e-cpu")
    page.fill("#id_matmul_size", "256")
    page.fill("#id_train_steps", "30")
    page.fill("#id_name", "from the browser")
    page.click("#submit-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))

    # The page updates itself over htmx until the run ends; no reload here.
    page.wait_for_selector('#run-live[data-status="succeeded"]', timeout=120_000)
    steps = page.locator("#steps tbody tr")
    assert steps.count() == 3
    assert page.locator('#steps [data-status="pass"]').count() == 3
    assert "npulab runner" in page.locator("#log").inner_text()
    assert "all steps passed" in page.locator("#exit-reason").inner_text()
    page.screenshot(path=str(platform.var_dir / "run-page.png"), full_page=True)


def test_a_bad_value_in_the_form_is_shown_on_the_page(platform: Platform, browser) -> None:
    context = browser.new_context()
    page = context.new_page()
    platform.log_in(page)
    page.goto(f"{platform.url}/runs/new/")
    page.fill("#id_devices", "0")
    page.click("#submit-form button[type=submit]")
    page.wait_for_selector(".invalid-feedback")
    assert "greater than or equal to 1" in page.locator(".invalid-feedback").first.inner_text()
    assert "/runs/new/" in page.url
    context.close()


def test_open_a_diff_of_two_snapshots(platform: Platform, browser) -> None:
    # The worker sent the host's snapshot when it started; upload a changed copy
    # as the host would after an upgrade.
    history = platform.api("GET", f"hosts/{HOST}/history/").json()["results"]
    current = platform.api("GET", f"snapshots/{history[0]['snapshot']}/").json()
    document = copy.deepcopy(current["data"])
    document["schema"] = 1
    document["python"]["packages"]["torch-npu"] = "2.5.1"
    document["python"]["key"]["torch-npu"] = "2.5.1"
    token = (platform.var_dir / f"{HOST}.token").read_text().strip()
    upload = requests.post(
        f"{platform.url}/api/v1/agent/snapshots/",
        json={"snapshot": document},
        headers={"Authorization": f"Token {token}"},
        timeout=30,
    )
    assert upload.status_code == 201, upload.text
    assert upload.json()["change"] == "torch_npu none → 2.5.1, +1 packages"

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    platform.log_in(page)
    page.goto(f"{platform.url}/hosts/{HOST}/")
    page.click("#history a:text('diff')")
    page.wait_for_selector("#diff")
    assert "torch_npu" in page.locator("#diff-versions").inner_text()
    added = page.locator("#diff-packages tr.added").inner_text()
    assert "torch-npu" in added
    assert "2.5.1" in added
    page.screenshot(path=str(platform.var_dir / "diff-page.png"), full_page=True)


def test_a_training_run_page_draws_its_curves(platform: Platform, browser) -> None:
    submitted = [
        platform.submit(kind="training", entry="builtin:cnn", max_steps=60, seed=seed)["id"]
        for seed in (1, 2)
    ]
    runs = [platform.wait(run_id) for run_id in submitted]
    assert [run["status"] for run in runs] == ["succeeded", "succeeded"]
    page = browser.new_page(viewport={"width": 1400, "height": 1200})
    platform.log_in(page)

    page.goto(f"{platform.url}/runs/{runs[0]['id']}/")
    page.wait_for_selector('#metric-charts[data-ready="1"]', timeout=30_000)
    keys = page.eval_on_selector_all(".metric-chart", "els => els.map(e => e.dataset.key)")
    assert {"loss", "lr", "samples_per_s"} <= set(keys)
    assert page.locator(".metric-chart canvas").count() >= 3
    loss_total = page.get_attribute('.metric-chart[data-key="loss"]', "data-total")
    assert loss_total == "60"
    assert page.locator("#checkpoints [data-step]").count() >= 1
    page.screenshot(path=str(platform.var_dir / "training-run.png"), full_page=True)

    # Choose the runs to compare on the run list, as a user does.
    page.goto(f"{platform.url}/runs/")
    for run in runs:
        page.check(f'input.run-select[value="{run["id"]}"]')
    assert page.inner_text("#compare-count") == "2"
    assert page.locator("#refresh-paused").is_visible()
    page.click("#compare-button")
    page.wait_for_selector('#compare-chart[data-ready="1"]', timeout=30_000)
    assert "ids=" in page.url
    assert page.locator("#compare-chart").get_attribute("data-key") == "loss"
    legend = page.locator("#compare-chart .u-legend").inner_text()
    assert f"#{runs[0]['id']}" in legend
    assert f"#{runs[1]['id']}" in legend
    page.screenshot(path=str(platform.var_dir / "compare.png"), full_page=True)
