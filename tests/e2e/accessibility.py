"""An accessibility check of a page as the browser drew it: axe-core's serious violations.

axe-core is vendored (tests/e2e/vendor/axe-core) and injected into the page under test; the
platform never serves it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
