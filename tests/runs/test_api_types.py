"""The run API's response types in its OpenAPI document are the types it answers with."""

from __future__ import annotations

import pytest
from drf_spectacular.generators import SchemaGenerator

from tests.runs.test_attempts import started

pytestmark = pytest.mark.django_db

STRINGS = {"type": "array", "items": {"type": "string"}, "readOnly": True}
INTEGERS = {"type": "array", "items": {"type": "integer"}, "readOnly": True}


@pytest.fixture(scope="module")
def schemas() -> dict:
    return SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]


@pytest.mark.parametrize("name", ["Run", "RunDetail"])
def test_lists_and_objects_are_typed_in_the_schema(schemas, name) -> None:
    run = schemas[name]["properties"]
    assert {key: run[key] for key in ("tags", "labels", "device_indices")} == {
        "tags": STRINGS,
        "labels": STRINGS,
        "device_indices": INTEGERS,
    }
    assert run["result"]["type"] == "object"
    assert run["progress"]["allOf"] == [{"$ref": "#/components/schemas/Progress"}]
    assert run["progress"]["nullable"] is True


def test_a_runs_attempts_and_progress_have_their_own_schemas(schemas) -> None:
    detail = schemas["RunDetail"]["properties"]
    assert detail["attempts"]["items"] == {"$ref": "#/components/schemas/RunAttempt"}
    assert detail["checkpoints"]["items"] == {"$ref": "#/components/schemas/Checkpoint"}
    assert schemas["RunAttempt"]["properties"]["device_indices"] == INTEGERS
    progress = schemas["Progress"]["properties"]
    assert {key: progress[key]["type"] for key in progress} == {
        "step": "integer",
        "total_steps": "integer",
        "steps_per_s": "number",
        "eta_s": "number",
        "running_step": "integer",
        "running_step_name": "string",
        "running_s": "number",
        "finished_steps": "array",
    }


def test_the_answer_has_those_types(api, owner, cpu_host) -> None:
    run = started(owner, cpu_host)
    body = api.get(f"/api/v1/runs/{run.pk}/").json()
    assert body["tags"] == []
    assert body["labels"] == []
    assert body["device_indices"] == [0]
    assert body["result"] == {}
    assert body["attempts"][0]["device_indices"] == [0]
