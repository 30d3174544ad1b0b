"""Issue 12's run pages in headless Chromium against the real platform: a run no host could take
refused by the form, then waiting with its reason until it expires; a live smoke run naming the
step it is running."""

from __future__ import annotations

import re

import pytest

from harness.stack import HOST, Platform
from tests.e2e.screenshots import shoot

pytestmark = [pytest.mark.e2e, pytest.mark.browser]
WAIT_MS = 120_000
# Where the control worker's sweep will find the run: its wait ran out a moment ago.
EXPIRE_NOW = """
from datetime import timedelta
from django.utils import timezone
from npulab.runs.models import Run
Run.objects.filter(pk={run_id}, status="queued").update(
    queue_expires_at=timezone.now() - timedelta(seconds=1)
)
"""


def test_a_run_no_host_could_take_is_refused_then_waits_and_expires(
    platform: Platform, browser
) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    platform.log_in(page)
    page.goto(f"{platform.url}/runs/new/?kind=smoke")
    page.select_option("#id_device_type", "npu")
    page.fill("#id_name", "needs an npu")
    page.click("#submit-form button[type=submit]")
    page.wait_for_selector("#form-problems")

    # Refused, saying why and what exists, with the way out; nothing was queued.
    refusal = page.locator('#submit-form .invalid-feedback[data-error-for="device_type"]')
    text = refusal.inner_text()
    # The shared stack's other hosts (the MindSpore tests' e2e-ms) are listed too when there.
    listed = r"[\w-]+ has \d+ cpu devices?"
    assert re.match(
        rf"no npu host is registered: (?=.*{HOST} has)({listed}, )*{listed}\. ", text
    ), text
    assert 'tick "Wait for a host that could take it" to queue it until one could' in text
    assert "Nothing was queued: one problem to fix." in page.locator("#form-problems").inner_text()
    assert "/runs/new/" in page.url
    assert page.input_value("#id_name") == "needs an npu"  # nothing typed is lost
    assert not [
        run
        for run in platform.api("GET", "runs/").json()["results"]
        if run["name"] == "needs an npu"
    ]
    shoot(page, platform.var_dir, "run-refused-no-host")

    # Asked to wait, it is queued with that reason and the time it gives up.
    page.check("#id_wait_for_host")
    page.click("#submit-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    run_id = int(page.url.rstrip("/").rsplit("/", 1)[1])
    waiting = page.locator("#queue-reason")
    waiting.wait_for()
    assert re.fullmatch(
        rf"Waiting: no registered host could take it \(no npu host is registered: "
        rf"(?=.*{HOST} has)({listed}, )*{listed}\); "
        r"waiting for one until \d{4}-\d\d-\d\d \d\d:\d\d UTC",
        waiting.inner_text().strip(),
    ), waiting.inner_text()
    run = platform.run(run_id)
    assert (run["status"], run["wait_for_host"]) == ("queued", True)
    assert run["queue_expires_at"] is not None
    shoot(page, platform.var_dir, "run-waiting-for-host")

    # Its wait runs out: the running control worker's sweep ends it, and the page, which
    # polls, says so without a reload.
    platform.manage("shell", "--no-imports", "-c", EXPIRE_NOW.format(run_id=run_id))
    page.wait_for_selector('#run-live[data-status="expired"]', timeout=WAIT_MS)
    banner = page.locator("#exit-reason").inner_text()
    assert re.fullmatch(
        r"Expired \(infrastructure\): no host that could take the run registered within 24 h: "
        rf"no npu host is registered: (?=.*{HOST} has)({listed}, )*{listed}",
        banner.strip(),
    ), banner
    assert page.locator("#queue-reason").count() == 0
    assert page.locator("#restart").count() == 1  # an expired run may be started again
    # The metrics card was drawn while it waited: it no longer says "yet".
    page.wait_for_function(
        "document.querySelector('#no-metrics').textContent === 'No metrics were logged.'",
        timeout=WAIT_MS,
    )
    run = platform.run(run_id)
    assert (run["status"], run["infrastructure_failure"]) == ("expired", True)
    shoot(page, platform.var_dir, "run-expired")
    page.close()


def test_a_live_smoke_run_names_the_step_running_now(platform: Platform, browser) -> None:
    # A training step of this many iterations runs until the test cancels it, on any
    # machine this suite runs on: the step is still running whenever the page is looked at.
    run_id = platform.submit(matmul_size=256, train_steps=100_000, name="long smoke")["id"]
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    platform.log_in(page)
    page.goto(f"{platform.url}/runs/{run_id}/")
    page.wait_for_selector('#running-step[data-step="train"]', timeout=WAIT_MS)
    running = page.locator("#running-step")
    assert re.fullmatch(
        r"Running: train for (\d+(\.\d)? s|\d+m \d\ds), after device, matmul", running.inner_text()
    ), running.inner_text()
    # The same from the API, for the CLI.
    progress = platform.run(run_id)["progress"]
    assert (progress["running_step"], progress["running_step_name"]) == (3, "train")
    assert progress["finished_steps"] == ["device", "matmul"]
    # The elapsed time moves on while the page refreshes itself.
    first = running.inner_text()
    page.wait_for_function(
        "text => document.querySelector('#running-step')?.textContent !== text",
        arg=first,
        timeout=WAIT_MS,
    )
    assert page.locator('#steps tr[data-step="matmul"]').count() == 1
    shoot(page, platform.var_dir, "smoke-running-step")

    assert platform.api("POST", f"runs/{run_id}/cancel/").status_code == 200
    assert platform.wait(run_id, timeout=60)["status"] == "cancelled"
    page.wait_for_selector('#run-live[data-status="cancelled"]', timeout=WAIT_MS)
    assert page.locator("#running-step").count() == 0
    page.close()
