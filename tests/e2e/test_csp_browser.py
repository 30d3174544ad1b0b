"""Every page works under the Content-Security-Policy: no inline script, no eval."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from harness.stack import HOST, Platform

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

# Chromium reports each refusal as a securitypolicyviolation event and a console error.
WATCH = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', (event) => {
  window.__cspViolations.push(event.violatedDirective + ' ' + (event.blockedURI || 'inline'));
});
"""


def violations(page) -> list[str]:
    return page.evaluate("window.__cspViolations")


def test_the_pages_run_their_code_with_no_inline_script(platform: Platform, browser) -> None:
    run = platform.submit(host=HOST, matmul_size=64, train_steps=5)
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, bypass_csp=False)
    context.add_init_script(WATCH)
    console: list[str] = []
    page = context.new_page()
    page.on(
        "console",
        lambda message: (
            console.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    platform.log_in(page)

    page.goto(f"{platform.url}/runs/{run['id']}/")
    page.wait_for_selector('#run-live[data-status="succeeded"]', timeout=120_000)
    assert violations(page) == []

    # The run list's selection (static npulab/app.js): ticking a run counts it for compare.
    page.goto(f"{platform.url}/runs/")
    page.locator(".run-select").first.check()
    # Waits go through locators: a string evaluated in the page is eval, which the policy refuses.
    expect(page.locator("#compare-count")).to_have_text("1")
    assert page.locator("#compare-button").is_enabled()
    page.locator("#select-page").check()
    assert page.locator(".run-select:checked").count() == page.locator(".run-select").count()
    assert violations(page) == []

    # A new token is copied with the button (no inline onclick).
    page.goto(f"{platform.url}/account/tokens/")
    page.fill("#id_name", "csp check")
    page.click("#token-form button[type=submit]")
    page.wait_for_selector("#new-token-value")
    page.click("#copy-token")
    expect(page.locator("#copy-token")).to_have_text("Copied")
    assert violations(page) == []

    for path in ("/", "/hosts/", f"/hosts/{HOST}/"):
        page.goto(f"{platform.url}{path}")
        page.wait_for_load_state("networkidle")
        assert violations(page) == [], path

    # The API docs, both of them, with no internet and no inline script.
    page.goto(f"{platform.url}/api/docs/")
    page.wait_for_selector(".swagger-ui .opblock", timeout=60_000)
    page.goto(f"{platform.url}/api/redoc/")
    page.get_by_role("heading", name="npulab API").first.wait_for(timeout=60_000)
    # ReDoc's own badge is an image from its CDN: refused, so the page asks nothing of the
    # internet (ReDoc hides the badge when it does not load).
    assert violations(page) == ["img-src https://cdn.redoc.ly/redoc/logo-mini.svg"]
    assert [line for line in console if "cdn.redoc.ly" not in line] == []
    context.close()
