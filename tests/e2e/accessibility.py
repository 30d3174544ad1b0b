"""An accessibility check of a page as the browser drew it: axe-core's serious violations.

axe-core is vendored (tests/e2e/vendor/axe-core) and injected into the page under test; the
platform never serves it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e.screenshots import shoot

AXE = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"
# axe's impacts are minor, moderate, serious and critical: the last two fail a test.
FAILING = ("serious", "critical")
# WCAG 2.1 A and AA, what a public service is held to.
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]


def violations(page: Any) -> list[dict[str, Any]]:
    """The page's serious and critical violations: rule, impact, help and the first nodes."""
    page.add_script_tag(path=str(AXE))
    found = page.evaluate(
        "tags => axe.run(document, {runOnly: {type: 'tag', values: tags},"
        " resultTypes: ['violations']}).then(r => r.violations)",
        TAGS,
    )
    return [
        {
            "rule": item["id"],
            "impact": item["impact"],
            "help": item["help"],
            "nodes": [node["target"] for node in item["nodes"][:3]],
        }
        for item in found
        if item["impact"] in FAILING
    ]


# The screen issue 34's pages are judged on.
VIEWPORT = {"width": 1280, "height": 800}


def assert_accessible(page: Any, name: str) -> None:
    found = violations(page)
    assert not found, f"{name}: {found}"


def assert_leads_with(page: Any, selector: str, var_dir: Path, name: str) -> None:
    """The run page leads with ``selector`` at 1280×800: on the first screen and above the
    run's facts. The page is pictured (``name``.png) and checked for serious violations;
    the test goes on at its own viewport."""
    before = page.viewport_size
    page.set_viewport_size(VIEWPORT)
    try:
        page.evaluate("window.scrollTo(0, 0)")
        lead = page.locator(selector).first.bounding_box()
        facts = page.locator("#run-facts").bounding_box()
        assert lead is not None, f"{name}: {selector} is not drawn"
        assert lead["y"] < VIEWPORT["height"], f"{name}: {selector} starts below the fold"
        assert facts is None or lead["y"] < facts["y"], f"{name}: {selector} follows the facts"
        shoot(page, var_dir, name)
        assert_accessible(page, name)
    finally:
        page.set_viewport_size(before)
