"""Where the tests find their data."""

from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent
REPO_DIR = TESTS_DIR.parent
ASCEND_FIXTURES = TESTS_DIR / "fixtures" / "ascend"
