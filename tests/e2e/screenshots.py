"""Pictures of page states the browser tests reach: always into the platform's var dir, and
into ``NPULAB_SCREENSHOTS_DIR`` when it is set (docs/screenshots/take.py sets it to
docs/screenshots/, whose PNGs the docs show)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

SCREENSHOTS_DIR_VARIABLE = "NPULAB_SCREENSHOTS_DIR"
# The docs' pictures: one width, and no page so long that its picture is mostly log lines.
DOCS_WIDTH = 1280
DOCS_MAX_HEIGHT = 2000


def screenshots_dir() -> Path | None:
    value = os.environ.get(SCREENSHOTS_DIR_VARIABLE, "")
    return Path(value) if value else None


def shoot(page: Any, var_dir: Path, name: str, full_page: bool = True) -> None:
    """``name``.png of the page as it is now, for the test's record and, when asked, the docs."""
    page.screenshot(path=str(var_dir / f"{name}.png"), full_page=full_page)
    target = screenshots_dir()
    if target is None:
        return
    target.mkdir(parents=True, exist_ok=True)
    before = page.viewport_size
    height = before["height"]
    if full_page:
        height = min(DOCS_MAX_HEIGHT, int(page.evaluate("document.documentElement.scrollHeight")))
    page.set_viewport_size({"width": DOCS_WIDTH, "height": height})
    # The top of the page (where a refusal or a banner is) even if a click scrolled it.
    page.evaluate("window.scrollTo(0, 0)")
    try:
        if full_page:
            # The narrower layout may be taller: measure again, within the same bound.
            taller = int(page.evaluate("document.documentElement.scrollHeight"))
            if taller > height:
                page.set_viewport_size(
                    {"width": DOCS_WIDTH, "height": min(DOCS_MAX_HEIGHT, taller)}
                )
        page.screenshot(path=str(target / f"{name}.png"))
    finally:
        page.set_viewport_size(before)
