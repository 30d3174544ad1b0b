"""An API token made on the tokens page, in real headless Chromium, used against the API."""

from __future__ import annotations

import pytest
import requests

from harness.stack import Platform

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


def test_make_a_read_token_in_the_browser_use_it_then_revoke_it(
    platform: Platform, browser
) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    platform.log_in(page)
    page.click("#nav-api-tokens")
    page.wait_for_selector("#token-form")

    page.fill("#id_name", "from the browser")
    page.uncheck("input[name=scopes][value=submit]")
    page.fill("#id_expires_days", "1")
    page.click("#token-form button[type=submit]")
    page.wait_for_selector("#new-token")
    plain = page.input_value("#new-token-value")
    assert plain.startswith("npl_")
    row = page.locator("#token-table tbody tr", has_text="from the browser")
    assert row.get_attribute("data-status") == "active"
    assert row.locator("[data-scope]").all_inner_texts() == ["read"]
    page.screenshot(path=str(platform.var_dir / "tokens-page.png"), full_page=True)

    api = requests.Session()
    api.headers["Authorization"] = f"Token {plain}"
    assert api.get(f"{platform.url}/api/v1/runs/", timeout=30).status_code == 200
    refused = api.post(
        f"{platform.url}/api/v1/runs/", json={"kind": "smoke", "device_type": "cpu"}, timeout=30
    )
    assert refused.status_code == 403
    assert refused.json()["code"] == "insufficient_scope"
    assert "`submit`" in refused.json()["detail"]

    # Revoke over htmx, confirming the browser's dialog.
    page.on("dialog", lambda dialog: dialog.accept())
    row.locator(".revoke-token").click()
    page.wait_for_selector('#token-table tr[data-status="revoked"]')
    assert page.locator("#new-token").count() == 0
    gone = api.get(f"{platform.url}/api/v1/runs/", timeout=30)
    assert (gone.status_code, gone.json()["code"]) == (401, "token_revoked")
