"""Coverage runs through the whole platform: a real host worker, a real runner, real Chromium."""

from __future__ import annotations

import pytest
import xmlschema
from junitparser import JUnitXml

from harness.stack import Platform
from tests.e2e.accessibility import assert_leads_with
from tests.paths import TESTS_DIR

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

SPEC = {
    "kind": "coverage",
    "device_type": "cpu",
    "op_set": "list",
    "ops": ["add", "mul", "abs", "sort", "nn.functional.relu"],
    # bool is not a dtype every one of them claims: those pairs are tested too.
    "dtypes": ["float32", "float16", "bool"],
}
CELLS = 5 * 3


def finished_coverage_runs(platform: Platform, *names: str) -> list[int]:
    """Coverage runs of SPEC, submitted together (the host takes them in turn), all ended."""
    submitted = [platform.submit(**SPEC, name=name)["id"] for name in names]
    for run_id in submitted:
        run = platform.wait(run_id, timeout=300)
        assert run["status"] == "succeeded", f"{run}\n{platform.tail()}"
    return submitted


def test_a_coverage_run_its_matrix_and_a_compare_with_a_seeded_regression(
    platform: Platform, browser
) -> None:
    baseline, candidate = finished_coverage_runs(platform, "coverage before", "coverage after")
    summary = platform.api("GET", f"runs/{candidate}/coverage/summary/").json()
    assert (summary["done"], summary["total"]) == (CELLS, CELLS)
    assert sum(summary["counts"].values()) == CELLS
    assert summary["counts"]["pass"] >= 12
    # The regression an upgrade might bring: sort float32 now kills its process.
    platform.manage(
        "shell",
        "-c",
        "from npulab.coverage.models import OpResult; "
        f"OpResult.objects.filter(run_id={candidate}, op='sort', dtype='float32')"
        ".update(status='crash', error='Fatal Python error: Aborted (seeded)')",
    )

    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    platform.log_in(page)
    page.goto(f"{platform.url}/runs/{candidate}/")
    progress = page.locator("#coverage-done")
    assert progress.inner_text().startswith(f"{CELLS} of {CELLS} results")
    assert_leads_with(page, "#coverage-progress", platform.var_dir, "pages-coverage-run")

    page.click("#open-matrix")
    page.wait_for_selector(".cov-matrix")
    assert page.locator(".cov-matrix tbody tr").count() == 5
    assert page.locator(".cov-matrix thead tr.dtypes th[data-dtype]").all_inner_texts() == [
        "float32",
        "float16",
        "bool",
    ]
    assert page.locator(".cov-matrix td.s-crash").count() == 1

    # Filters are applied over htmx, without a reload, and land in the URL.
    page.select_option("#status", "crash")
    page.wait_for_function(
        "document.querySelector('#matrix-count').innerText.startsWith('1 of 5 ops')"
    )
    assert "status=crash" in page.url
    page.click(".cov-matrix td.s-crash")
    page.wait_for_selector("#cell")
    assert "Fatal Python error: Aborted (seeded)" in page.locator("#cell-error").inner_text()
    assert "sort · float32" in page.locator("#cell .card-header").inner_text()
    page.screenshot(path=str(platform.var_dir / "coverage-matrix.png"), full_page=True)

    page.click("#compare-link")
    page.wait_for_selector("#baseline-form")
    page.select_option("#baseline", str(baseline))
    page.click("#baseline-form button[type=submit]")
    page.wait_for_selector("#group-regressions")
    assert page.locator('[data-group="regressions"]').inner_text() == "1"
    assert page.locator('#group-regressions tr[data-op="sort"][data-dtype="float32"]').count() == 1
    page.screenshot(path=str(platform.var_dir / "coverage-compare.png"), full_page=True)

    junit = platform.session.get(
        platform.url + page.locator("#junit-link").get_attribute("href"), timeout=30
    )
    assert junit.status_code == 200
    xmlschema.XMLSchema(str(TESTS_DIR / "fixtures" / "junit.xsd")).validate(junit.text)
    (suite,) = list(JUnitXml.fromstring(junit.content))
    assert (suite.tests, suite.failures) == (CELLS, 1)

    # The generic compare API gates on the same regression.
    gate = platform.api(
        "GET", "runs/compare/", params={"baseline": baseline, "candidate": candidate}
    ).json()
    rows = {row["name"]: row for row in gate["comparisons"]}
    assert rows["op_regressions"]["candidate"] == 1
    assert rows["op_regressions"]["regression"]
    page.close()
