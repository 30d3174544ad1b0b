"""Take the docs' screenshots again: the browser tests that reach each page state, run with
NPULAB_SCREENSHOTS_DIR pointing here, against a real platform (harness/stack.py).

    .venv/bin/python docs/screenshots/take.py            # every picture docs/ui.md shows
    .venv/bin/python docs/screenshots/take.py -k review  # pytest's -k, to take some again

It uses the services the tests use (PostgreSQL and Redis when they run here, else SQLite
and an embedded Redis; NPULAB_TEST_* choose, see harness/services.py) and Debian's chromium.
Each picture is 1280 px wide; the sizes are printed at the end (keep the folder small).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
# The tests whose pictures docs/ui.md shows (tests/e2e/screenshots.py writes them).
TESTS = [
    "tests/e2e/test_review_browser.py",
    "tests/e2e/test_run_pages_browser.py",
    "tests/e2e/test_live_run_browser.py::"
    "test_a_live_training_run_shows_its_progress_log_and_what_cancel_loses",
    "tests/e2e/test_form_browser.py::test_the_form_reports_every_problem_in_one_round",
    "tests/e2e/test_placement_e2e.py::test_the_failure_banner_shows_the_exception",
    "tests/e2e/test_pages_browser.py",
    "tests/e2e/test_profile_browser.py",
]


def main(argv: list[str]) -> int:
    env = dict(os.environ, NPULAB_SCREENSHOTS_DIR=str(HERE))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS, *argv]
    code = subprocess.call(command, cwd=REPO, env=env)
    pictures = sorted(HERE.glob("*.png"))
    for picture in pictures:
        sys.stdout.write(f"{picture.stat().st_size / 1024:8.0f} KiB  {picture.relative_to(REPO)}\n")
    total = sum(picture.stat().st_size for picture in pictures)
    sys.stdout.write(f"{total / 1024 / 1024:8.2f} MiB  in all\n")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
