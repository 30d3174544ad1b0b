"""Issue 34's pages as people read them, in headless Chromium at 1280×800 against the real
platform: each page state is pictured (the platform's var dir keeps the PNGs for CI) and
checked with axe-core for serious accessibility violations."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.stack import Platform
from tests.e2e.accessibility import VIEWPORT, assert_accessible, assert_leads_with
from tests.e2e.conftest import write_script
from tests.e2e.screenshots import shoot

pytestmark = [pytest.mark.e2e, pytest.mark.browser]
# A real torch_npu OOM line (tests/fixtures/diagnosis/corpus/oom-old-format-vllm-ascend.log)
# under the wrapper a failed aclrtMemcpy prints last.
FAILING_SCRIPT = (
    "import sys\n"
    "print('\\x1b[32mstep 1\\x1b[0m loss 2.30', flush=True)\n"
    "print('RuntimeError: NPU out of memory. Tried to allocate 22.00 MiB (NPU 0; 60.97 GiB "
    "total capacity; 10.24 GiB already allocated; 19.52 MiB free)', file=sys.stderr)\n"
    "print('aclrtMemcpy failed, error code 507899', file=sys.stderr)\n"
    "sys.exit(1)\n"
)

HANGING_SCRIPT = "import time\nprint('waiting for a peer', flush=True)\ntime.sleep(3600)\n"


@pytest.fixture(scope="module")
def runs(platform: Platform, scripts_dir: Path) -> dict[str, int]:
    """A trained run with curves, a failed one with its diagnosis, a smoke run: all ended."""
    script = write_script(scripts_dir, "pages_fails.py", FAILING_SCRIPT)
    found = {
        "training": platform.submit(
            kind="training", entry="builtin:cnn", max_steps=60, name="cnn curves"
        )["id"],
        "failed": platform.submit(
            kind="training",
            entry=str(script),
            max_restarts=0,
            # Real names are long and unbroken; the list must still fit without scrolling.
            name="oom-job-llama2-7b-sft-ascend910b-bs32-seq4096-zero3-lr2e-5-cosine-0042",
        )["id"],
        "smoke": platform.submit(name="nightly smoke")["id"],
    }
    ended = {name: platform.wait(run_id, timeout=600)["status"] for name, run_id in found.items()}
    expected = {"training": "succeeded", "failed": "failed", "smoke": "succeeded"}
    assert ended == expected, platform.tail()
    return found


def _page(platform: Platform, browser) -> object:
    page = browser.new_page(viewport=VIEWPORT)
    platform.log_in(page)
    return page


def test_the_training_run_page_leads_with_its_curves(platform: Platform, browser, runs) -> None:
    page = _page(platform, browser)
    page.goto(f"{platform.url}/runs/{runs['training']}/")
    page.wait_for_selector('#metric-charts[data-ready="1"]')
    headline = page.locator("#run-headline")
    # The curves are the first card, above the fold at 1280×800.
    assert headline.bounding_box()["y"] < VIEWPORT["height"] / 2
    assert page.locator('#metric-stats tr[data-metric="loss"]').count() == 1
    assert page.locator("#headline-steps").inner_text().startswith("60")
    shoot(page, platform.var_dir, "pages-training-run")
    assert_accessible(page, "training run")
    page.close()


def test_a_hung_run_page_leads_with_its_diagnosis(platform: Platform, browser, scripts_dir) -> None:
    # A job that prints and then waits for ever: after hang_timeout_s of silence with its
    # process idle it is stopped, its stacks kept, and its page says it hung.
    script = write_script(scripts_dir, "pages_hangs.py", HANGING_SCRIPT)
    run_id = platform.submit(
        kind="training", entry=str(script), max_restarts=0, hang_timeout_s=3, name="stuck job"
    )["id"]
    run = platform.wait(run_id, timeout=600)
    assert (run["status"], run["exit_cause"]) == ("failed", "hang"), platform.tail()
    page = _page(platform, browser)
    page.goto(f"{platform.url}/runs/{run_id}/")
    diagnosis = page.locator("#diagnosis")
    assert "Diagnosis: hang" in diagnosis.inner_text()
    assert "its devices idle" in diagnosis.inner_text()
    assert_leads_with(page, "#diagnosis", platform.var_dir, "pages-hung-run")
    page.close()


def test_a_failed_run_page_leads_with_its_diagnosis(platform: Platform, browser, runs) -> None:
    run = platform.run(runs["failed"])
    assert (run["diagnosis"] or {}).get("category") == "oom", run
    page = _page(platform, browser)
    page.goto(f"{platform.url}/runs/{runs['failed']}/")
    diagnosis = page.locator("#diagnosis")
    assert "oom" in diagnosis.inner_text()
    assert "Tried to allocate" in diagnosis.inner_text()
    assert diagnosis.bounding_box()["y"] < VIEWPORT["height"] / 2
    shoot(page, platform.var_dir, "pages-failed-run")
    assert_accessible(page, "failed run")

    page.goto(f"{platform.url}/runs/{runs['failed']}/log/")
    page.click("#first-error")
    page.wait_for_selector("#log-lines .ansi-fg-green")
    assert "Tried to allocate" in page.locator("#log-lines").inner_text()
    shoot(page, platform.var_dir, "pages-log")
    assert_accessible(page, "log")
    page.close()


def test_the_run_list_answers_at_a_glance_and_fits_1280(platform: Platform, browser, runs) -> None:
    page = _page(platform, browser)
    page.goto(f"{platform.url}/runs/")
    training = page.locator(f'tr[data-run="{runs["training"]}"]')
    assert training.locator("svg.sparkline").count() == 1, training.inner_html()
    assert "loss" in training.locator(".run-headline").inner_text()
    failed = page.locator(f'tr[data-run="{runs["failed"]}"] .run-failure')
    assert failed.get_attribute("data-failure") == "oom"
    # Whatever people put in a row (a run name, a metric key, a host or user name), it
    # wraps: a copy of the failed run's row with each such text made one unbroken
    # 120-character word. Badges and times are the platform's own short words.
    page.evaluate(
        "() => { const row = document.querySelector('tr[data-run]:has(.run-failure)');"
        " const copy = row.cloneNode(true); copy.dataset.run = 'copy';"
        " const walk = document.createTreeWalker(copy, NodeFilter.SHOW_TEXT);"
        " while (walk.nextNode()) { const text = walk.currentNode;"
        "   if (text.data.trim() && !text.parentElement.closest('.badge, .text-nowrap'))"
        "     text.data = 'x'.repeat(120); }"
        " row.after(copy); }"
    )
    overflow = page.evaluate(
        "() => { const t = document.querySelector('#run-table .table-responsive');"
        " if (t.scrollWidth <= t.clientWidth) return null;"
        " const cells = [...t.querySelectorAll('thead th')].map("
        "   th => `${th.innerText}: ${Math.round(th.getBoundingClientRect().width)}px`);"
        " return `${t.scrollWidth}px in ${t.clientWidth}px; ${cells.join(', ')}`; }"
    )
    assert overflow is None, f"the run table scrolls sideways at 1280 px: {overflow}"
    page.evaluate("() => document.querySelector('tr[data-run=\"copy\"]').remove()")
    shoot(page, platform.var_dir, "pages-run-list")
    assert_accessible(page, "run list")

    page.fill('input[name="q"]', "cnn curves")
    page.click('#run-filters button[type="submit"]')
    page.wait_for_url("**q=cnn+curves**")
    assert page.locator("tr[data-run]").count() == 1
    page.close()


def test_the_dashboard_is_the_morning_view(platform: Platform, browser, runs) -> None:
    page = _page(platform, browser)
    page.goto(f"{platform.url}/")
    assert page.locator('#failures [data-category="oom"]').count() == 1
    assert page.locator("#queue-p50").inner_text() != ""
    assert page.locator("#snapshots li").count() >= 1
    shoot(page, platform.var_dir, "pages-dashboard")
    assert_accessible(page, "dashboard")
    page.close()
