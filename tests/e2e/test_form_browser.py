"""The submit form's one round of validation, the API docs with no internet, the error pages:
in headless Chromium against the real platform. Screenshots go to the platform's var dir."""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from harness.stack import Platform
from tests.e2e.screenshots import shoot

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

LOCAL = {"127.0.0.1", "localhost"}
# What a page needs from elsewhere to render. ReDoc's "API docs by Redocly" footer
# asks cdn.redoc.ly for its logo (an image that hides itself when it fails): not needed.
NEEDED = {"script", "stylesheet", "font", "fetch", "xhr", "document"}


@pytest.fixture
def offline(browser) -> Iterator[tuple[object, list[str]]]:
    """A page whose every request to anything but this machine fails, and those it needed."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    refused: list[str] = []

    def only_local(route) -> None:
        if urlsplit(route.request.url).hostname in LOCAL:
            route.continue_()
        else:
            if route.request.resource_type in NEEDED:
                refused.append(route.request.url)
            route.abort()

    context.route("**/*", only_local)
    yield context.new_page(), refused
    context.close()


def test_the_form_reports_every_problem_in_one_round(platform: Platform, offline) -> None:
    page, _ = offline
    platform.log_in(page)
    page.goto(f"{platform.url}/runs/new/")
    page.select_option("#id_kind", "coverage")
    page.wait_for_selector("#id_op_set")  # the form redrawn for the kind
    page.fill("#id_devices", "0")
    page.fill("#id_timeout_hours", "0")
    page.fill("#id_timeout_minutes", "0")
    page.select_option("#id_op_set", "model")
    page.fill("#id_include", "nn.functional.*")
    page.fill("#id_dtypes", "float32 float99")
    page.fill("#id_env", "ASCEND_GLOBAL_LOG_LEVEL=3\nnot a setting")
    page.click("#submit-form button[type=submit]")
    page.wait_for_selector("#form-problems")

    errors = {
        node.get_attribute("data-error-for"): node.inner_text()
        for node in page.locator("#submit-form .invalid-feedback").all()
    }
    assert errors == {
        "devices": "Ensure this value is greater than or equal to 1.",
        "timeout_hours": "The timeout must be at least 1 minute.",
        "entry": "op_set model needs the entry whose ops are recorded",
        "include": "op_set model tests the ops the entry called; filter with dtypes",
        "dtypes": errors["dtypes"],
        "env": "line 2 is not KEY=VALUE: not a setting",
    }
    assert errors["dtypes"].startswith("unknown dtype(s) float99")
    assert "6 problems to fix" in page.locator("#form-problems").inner_text()
    assert page.input_value("#id_include") == "nn.functional.*"  # nothing typed is lost
    assert "/runs/new/" in page.url
    shoot(page, platform.var_dir, "form-errors")

    # Fixed in one go, the run is queued and the page goes to it.
    page.fill("#id_devices", "1")
    page.fill("#id_timeout_minutes", "5")
    page.select_option("#id_op_set", "list")
    page.fill("#id_include", "")
    page.fill("#id_ops", "add")
    page.fill("#id_dtypes", "float32")
    page.fill("#id_env", "ASCEND_GLOBAL_LOG_LEVEL=3")
    page.fill("#id_name", "one add")
    page.click("#submit-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    run = platform.run(int(page.url.rstrip("/").rsplit("/", 1)[1]))
    assert (run["spec"]["timeout_s"], run["spec"]["env"]) == (300, {"ASCEND_GLOBAL_LOG_LEVEL": "3"})
    assert platform.wait(run["id"])["status"] == "succeeded"

    page.goto(f"{platform.url}/runs/")
    row = page.locator(f'tr[data-run="{run["id"]}"]')
    assert "one add" in row.inner_text()
    assert row.locator("[data-headline]").count() >= 1
    shoot(page, platform.var_dir, "form-run-list")


def test_the_training_form_offers_built_in_entries(platform: Platform, offline) -> None:
    page, _ = offline
    platform.log_in(page)
    page.goto(f"{platform.url}/runs/new/?kind=training")
    options = page.locator("#id_entry option").all_inner_texts()
    assert options[:2] == ["builtin:cnn (built-in job)", "builtin:lm (built-in job)"]
    assert page.get_attribute("#id_args", "placeholder").startswith("--lr 0.01")
    assert page.get_attribute("#id_python", "placeholder") == "/opt/venvs/torch_npu/bin/python"
    assert page.input_value("#id_timeout_hours") == "168"
    page.screenshot(path=str(platform.var_dir / "form-training.png"), full_page=True)


def test_redoc_renders_the_api_with_no_internet(platform: Platform, offline) -> None:
    page, refused = offline
    page.goto(f"{platform.url}/api/redoc/")
    page.wait_for_selector("text=npulab API", timeout=60_000)
    page.wait_for_selector("text=Submit runs, follow them, compare them.")
    page.wait_for_load_state("networkidle")
    assert page.evaluate("document.fonts.ready.then(() => document.fonts.check('16px Roboto'))")
    # ReDoc gives each tag's section the id tag/<name>, in the document's order.
    sections = page.evaluate(
        "[...document.querySelectorAll('[id^=\"tag/\"]')].map(node => node.id.slice(4))"
    )
    sections = list(dict.fromkeys(section.split("/", 1)[0] for section in sections))
    assert sections[0] == "runs"
    assert sections[-1] == "agent"
    page.screenshot(path=str(platform.var_dir / "form-redoc.png"))
    assert refused == []


def test_swagger_ui_renders_the_api_with_no_internet(platform: Platform, offline) -> None:
    page, refused = offline
    page.goto(f"{platform.url}/api/docs/")
    page.wait_for_selector(".opblock-tag", timeout=60_000)
    page.wait_for_load_state("networkidle")
    tags = [tag.split("\n", 1)[0].strip() for tag in page.locator(".opblock-tag").all_inner_texts()]
    assert tags[-1] == "agent"
    assert "runs" in tags
    assert page.locator(".opblock-summary-path >> text=/api/v1/runs/").count() >= 1
    page.screenshot(path=str(platform.var_dir / "form-swagger.png"))
    assert refused == []


def test_error_pages_carry_the_navigation(platform: Platform, offline) -> None:
    page, _ = offline
    platform.log_in(page)
    response = page.goto(f"{platform.url}/runs/999999/")
    assert response is not None
    assert response.status == 404
    assert page.locator("nav.navbar a:text('Runs')").count() == 1
    assert page.locator('#error-page[data-status="404"]').count() == 1
    page.screenshot(path=str(platform.var_dir / "form-404.png"))
    api = page.goto(f"{platform.url}/api/v1/nowhere/")
    assert api is not None
    assert api.status == 404
    assert api.json()["code"] == "not_found"
