from __future__ import annotations

import os
import subprocess
import sys

from tests.paths import REPO_DIR
from workers.contract.kinds import EXTRA_KINDS_ENV


def test_the_committed_openapi_schema_is_current_and_valid() -> None:
    """The schema a deployment serves: the real settings, without the tests' own kind."""
    env = {key: value for key, value in os.environ.items() if key != EXTRA_KINDS_ENV}
    env["DJANGO_SETTINGS_MODULE"] = "npulab.settings"
    # A fresh clone has no var/secret_key before `make run` or `make lint` writes one.
    env.setdefault("NPULAB_SECRET_KEY", "only-for-the-schema")
    generated = subprocess.run(
        [sys.executable, "manage.py", "spectacular", "--validate", "--fail-on-warn"],
        cwd=REPO_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    committed = (REPO_DIR / "docs" / "openapi.yaml").read_text()
    assert generated == committed, "docs/openapi.yaml is stale: run `make schema`"
