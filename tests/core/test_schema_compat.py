"""The breaking-change check of the REST API: additions pass, anything a client notices fails."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import CommandError, call_command

from npulab.core.schema_compat import breaking_changes
from tests.paths import REPO_DIR

RELEASED = REPO_DIR / "docs" / "api-releases" / "0.1.0.yaml"
RUN = "/api/v1/runs/{id}/"


@pytest.fixture(scope="module")
def released() -> dict[str, Any]:
    return yaml.safe_load(RELEASED.read_text())


def changed(schema: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(schema)


def test_the_committed_schema_is_compatible_with_the_last_release(released) -> None:
    current = yaml.safe_load((REPO_DIR / "docs" / "openapi.yaml").read_text())
    assert breaking_changes(released, current) == []


def test_additions_are_compatible(released) -> None:
    new = changed(released)
    new["paths"]["/api/v1/things/"] = {"get": {"responses": {"200": {}}}}
    run = new["components"]["schemas"]["RunDetail"]
    run["properties"]["progress"] = {"type": "object"}
    request = new["components"]["schemas"]["PatchedRunRequest"] = {"type": "object"}
    request["properties"] = {"note": {"type": "string"}}
    assert breaking_changes(released, new) == []


def test_a_removed_path_or_operation_breaks(released) -> None:
    new = changed(released)
    del new["paths"][RUN]
    del new["paths"]["/api/v1/runs/{id}/cancel/"]["post"]
    assert breaking_changes(released, new) == [
        f"{RUN}: removed",
        "POST /api/v1/runs/{id}/cancel/: removed",
    ]


def test_a_removed_or_retyped_reply_field_breaks(released) -> None:
    new = changed(released)
    run = new["components"]["schemas"]["RunDetail"]["properties"]
    del run["exit_reason"]
    run["attempt"] = {"type": "string"}
    run["exit_code"]["nullable"] = False
    run["name"]["nullable"] = True
    problems = breaking_changes(released, new)
    assert f"GET {RUN} 200: field 'exit_reason' removed" in problems
    assert f"GET {RUN} 200.attempt: type ['integer'] became ['string']" in problems
    assert f"GET {RUN} 200.name: may be null now" in problems
    # A reply that stops being null is still what a client expects.
    assert not [problem for problem in problems if ".exit_code" in problem]


def test_a_new_required_parameter_or_request_field_breaks(released) -> None:
    new = changed(released)
    operation = new["paths"]["/api/v1/runs/"]["get"]
    operation["parameters"].append({"in": "query", "name": "project", "required": True})
    token = new["paths"]["/api/v1/agent/heartbeat/"]["post"]["requestBody"]["content"]
    schema = new["components"]["schemas"][
        token["application/json"]["schema"]["$ref"].split("/")[-1]
    ]
    schema.setdefault("required", []).append("load")
    problems = breaking_changes(released, new)
    assert "GET /api/v1/runs/: query parameter 'project' is required now" in problems
    assert "POST /api/v1/agent/heartbeat/ request: field 'load' is required now" in problems


def test_the_command_fails_on_a_broken_schema_and_names_the_change(
    released, tmp_path: Path
) -> None:
    broken = changed(released)
    del broken["paths"][RUN]["get"]
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(broken))
    with pytest.raises(
        CommandError, match=r"1 breaking change\(s\)[\s\S]*GET /api/v1/runs/\{id\}/: removed"
    ):
        call_command("api_compat", str(RELEASED), str(path))
