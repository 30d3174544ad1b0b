"""A short real stability run on the CPU through web, Celery and the host worker, with a verdict."""

from __future__ import annotations

import time

import pytest

from harness.stack import HOST, Platform
from tests.e2e.accessibility import VIEWPORT, assert_leads_with

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

# A host of its own: the fail it gets on purpose must not close the shared host to others.
FAULTY = "e2e-faulty"
SPEC = {
    "kind": "stability",
    "device_type": "cpu",
    "duration_s": 3,
    "interval_s": 1,
    "size": 96,
    # This machine is shared with other tests: its speed may wander; the checks may not.
    "warn_drop_pct": 99,
    "fail_drop_pct": 100,
}


def test_a_stability_run_gives_a_verdict_its_intervals_and_their_charts(
    platform: Platform, browser
) -> None:
    run_id = platform.submit(**SPEC, name="stability e2e")["id"]
    run = platform.wait(run_id, timeout=300)
    assert run["status"] == "succeeded", f"{run}\n{platform.tail()}"
    assert run["host"] == HOST
    summary = run["result"]["summary"]
    assert (summary["verdict"], summary["reasons"], summary["intervals"]) == ("pass", [], 3)
    assert summary["throughput"] > 0
    assert summary["mismatches"] == 0

    series = platform.api("GET", f"runs/{run_id}/metrics/", params={"key": "throughput/0"})
    assert [step for step, _ in series.json()["points"]] == [1, 2, 3]
    # Interval events are the kind's own rows, not events in the run's list.
    events = platform.api("GET", f"runs/{run_id}/events/", params={"type": "interval"}).json()
    assert events["results"] == []

    page = browser.new_page(viewport=VIEWPORT)
    platform.log_in(page)
    page.goto(f"{platform.url}/runs/{run_id}/")
    assert page.locator("#stability-verdict").get_attribute("data-verdict") == "pass"
    assert_leads_with(page, "#stability-verdict", platform.var_dir, "pages-stability-run")
    assert page.locator("#stability-verdict-text").inner_text() == "PASS"
    cells = page.locator("#stability-grid [data-consistency]")
    assert cells.count() == 3
    assert set(cells.evaluate_all("cells => cells.map(c => c.dataset.consistency)")) == {"match"}
    # Throughput is charted like any metric, from the interval events.
    page.wait_for_selector("#metric-charts .metric-chart canvas, #metric-charts .metric-value")
    assert "throughput/0" in page.locator("#metric-list").inner_text()
    page.screenshot(path=str(platform.var_dir / "stability-run.png"), full_page=True)
    page.close()


def start_second_host(platform: Platform) -> None:
    platform.start_worker(FAULTY)
    platform.wait_online(FAULTY)


def test_an_injected_mismatch_fails_the_run_and_marks_its_device_bad(platform: Platform) -> None:
    start_second_host(platform)
    try:
        faults = "mismatch:interval=2,device=0"
        run_id = platform.submit(**SPEC, faults=faults, host=FAULTY, name="corrupt")["id"]
        run = platform.wait(run_id, timeout=300)
    finally:
        platform.processes[f"worker-{FAULTY}"].stop()
    assert run["status"] == "failed", f"{run}\n{platform.tail()}"
    assert run["exit_cause"] == "consistency_mismatch"
    assert "device 0 at interval 2" in run["exit_reason"]
    summary = run["result"]["summary"]
    assert summary["verdict"] == "fail"
    assert summary["mismatches"] == 1
    assert summary["injected_faults"] == faults
    # on_finished ran after the run's final state was committed: the device is bad.
    deadline = time.monotonic() + 30
    while True:
        state = platform.manage(
            "shell",
            "-c",
            "from npulab.health.models import DeviceHealth; "
            f"print(DeviceHealth.objects.get(host__name='{FAULTY}', index=0).state)",
        ).splitlines()[-1]  # the shell may say first what it imported
        if state == "bad" or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert state == "bad", f"{state}\n{platform.tail()}"
