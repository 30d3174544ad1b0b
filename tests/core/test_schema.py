from __future__ import annotations

import io

from django.core.management import call_command

from tests.paths import REPO_DIR


def test_the_committed_openapi_schema_is_current_and_valid() -> None:
    out = io.StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    committed = (REPO_DIR / "docs" / "openapi.yaml").read_text()
    assert out.getvalue() == committed, "docs/openapi.yaml is stale: run `make schema`"
