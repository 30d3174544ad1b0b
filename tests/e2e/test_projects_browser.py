"""Making a project, submitting to it from the form and reading its page, in headless Chromium
against the real platform (the e2e user is a superuser: an operator, owner everywhere)."""

from __future__ import annotations

import uuid

import pytest

from harness.stack import Platform
from tests.e2e.screenshots import shoot

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


def test_make_a_project_submit_to_it_and_see_the_run_on_its_page(
    platform: Platform, browser
) -> None:
    slug = f"proj-{uuid.uuid4().hex[:8]}"
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    platform.log_in(page)
    page.goto(f"{platform.url}/projects/")
    page.click("#new-project")
    page.fill("#id_slug", slug)
    page.fill("#id_name", "Browser project")
    page.check("#pool-choices input[value=default]")
    page.click("#project-form button[type=submit]")
    page.wait_for_selector("#member-table")
    assert page.locator("#project-pools [data-pool=default]").count() == 1
    assert page.locator("#member-table [data-member=e2e] [data-role]").count() == 0  # a select

    page.click("#submit-here")
    page.wait_for_selector("#id_project")
    assert page.input_value("#id_project") == slug
    page.click("#submit-form button[type=submit]")
    page.wait_for_url(f"{platform.url}/runs/*/")
    run_id = int(page.url.rstrip("/").rsplit("/", 1)[1])
    assert platform.run(run_id)["project"] == slug
    assert "Browser project" in page.locator("dl.facts").first.inner_text()
    platform.wait(run_id)

    page.goto(f"{platform.url}/projects/{slug}/")
    page.wait_for_selector(f"[data-run='{run_id}']")
    shoot(page, platform.var_dir, "project-page")
    page.goto(f"{platform.url}/runs/?project={slug}")
    assert page.locator("#run-table [data-run]").count() == 1
