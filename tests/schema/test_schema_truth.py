"""What docs/openapi.yaml promises, and the answers it describes, hold: errors, nulls, downloads."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from npulab.core.api import OCTET_STREAM
from tests.artifacts.conftest import local_store  # noqa: F401 - the fixture
from tests.artifacts.test_checkpoints import checkpoint, single_put
from tests.paths import REPO_DIR
from tests.runs.test_attempts import started

SCHEMA = yaml.safe_load((REPO_DIR / "docs" / "openapi.yaml").read_text())
OPERATIONS = [
    (f"{method.upper()} {path}", operation)
    for path, item in SCHEMA["paths"].items()
    for method, operation in item.items()
]


@pytest.mark.parametrize(("name", "operation"), OPERATIONS, ids=[name for name, _ in OPERATIONS])
def test_every_operation_documents_the_errors_it_can_answer(name: str, operation: Any) -> None:
    responses = operation["responses"]
    places = {parameter["in"] for parameter in operation.get("parameters", [])}
    expected = {"401", "403"}
    if "path" in places:
        expected.add("404")
    if "requestBody" in operation:
        expected |= {"400", "413", "415"}
    if places - {"path"}:
        expected.add("400")
    assert expected <= responses.keys()
    for code in expected:
        body = responses[code].get("$ref") or responses[code]["content"]["application/json"]
        assert body


@pytest.mark.parametrize(
    ("component", "field"),
    [
        ("Run", "host"),
        ("RunDetail", "host"),
        ("Run", "submitted_by"),
        ("Snapshot", "known_good_by"),
        ("SnapshotDetail", "known_good_by"),
    ],
)
def test_fields_that_can_be_null_are_nullable(component: str, field: str) -> None:
    assert SCHEMA["components"]["schemas"][component]["properties"][field]["nullable"] is True


def test_request_text_refuses_nul_in_the_schema_and_the_api(api) -> None:
    token = SCHEMA["components"]["schemas"]["ApiTokenCreateRequest"]["properties"]["name"]
    assert token["pattern"] == "^[^\\u0000]*$"
    reply = api.post("/api/v1/tokens/", {"name": "a\x00b"}, format="json")
    assert reply.status_code == 400
    assert "name" in reply.json()


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/runs/{run_id}/checkpoints/{step}/download/",
        "/api/v1/agent/runs/{run_id}/checkpoints/{step}/",
    ],
)
def test_checkpoint_downloads_are_documented_as_bytes(path: str) -> None:
    content = SCHEMA["paths"][path]["get"]["responses"]["200"]["content"]
    assert content == {OCTET_STREAM: {"schema": {"type": "string", "format": "binary"}}}


@pytest.mark.django_db
@pytest.mark.usefixtures("local_store")
def test_checkpoint_downloads_are_served_as_octet_stream(owner, cpu_host, host_api, api) -> None:
    run = started(owner, cpu_host)
    checkpoint(run, 5, b"weights")
    assert single_put(host_api, run, 5, b"weights").status_code == 201
    user = api.get(f"/api/v1/runs/{run.pk}/checkpoints/5/download/")
    agent = host_api.get(f"/api/v1/agent/runs/{run.pk}/checkpoints/5/")
    for reply in (user, agent):
        assert reply.status_code == 200
        # Guessed from state.pt, it was application/vnd.snesdev-page-table.
        assert reply["Content-Type"] == OCTET_STREAM
        assert b"".join(reply.streaming_content) == b"weights"


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/v1/agent/heartbeat/", "/api/v1/tokens/"])
def test_a_form_with_too_many_fields_is_an_error_body(api, host_api, path: str) -> None:
    client = host_api if "/agent/" in path else api
    fields = "&".join(f"f{i}=1" for i in range(1001))
    reply = client.post(path, fields, content_type="application/x-www-form-urlencoded")
    assert reply.status_code == 400
    assert reply["Content-Type"] == "application/json"
    assert reply.json()["code"] == "invalid"


# -- what the fuzzing found: each a 400 naming the field now -----------------------

BIG = 10**30


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "field"),
    [
        (f"/api/v1/snapshots/diff/?a={BIG}&b=1", "a"),
        (f"/api/v1/snapshots/diff/?a=1&b={2**63}", "b"),
    ],
)
def test_snapshot_ids_beyond_64_bits_name_the_parameter(api, cpu_host, path, field) -> None:
    reply = api.get(path)
    assert reply.status_code == 400
    assert field in reply.json()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("offset=null", "offset"),
        ("offset=-1", "offset"),
        (f"offset={BIG}", "offset"),
        ("limit=0", "limit"),
        ("limit=ten", "limit"),
        (f"limit={BIG}", "limit"),
    ],
)
@pytest.mark.parametrize("path", ["/api/v1/runs/", "/api/v1/hosts/", "/api/v1/snapshots/"])
def test_a_page_limit_or_offset_that_is_not_a_count_is_refused(api, path, query, field) -> None:
    reply = api.get(f"{path}?{query}")
    assert reply.status_code == 400
    assert field in reply.json()


@pytest.mark.django_db
def test_a_page_limit_past_the_most_is_served_as_the_most(api, cpu_host) -> None:
    reply = api.get("/api/v1/hosts/?limit=1000000&offset=0")
    assert reply.status_code == 200
    assert [host["name"] for host in reply.json()["results"]] == ["cpu-01"]


@pytest.mark.django_db
def test_a_number_is_not_a_token_name(api) -> None:
    reply = api.post("/api/v1/tokens/", {"name": 0}, format="json")
    assert reply.status_code == 400
    assert "name" in reply.json()


@pytest.mark.django_db
@pytest.mark.parametrize("field", ["hostname", "platform", "worker_version"])
def test_a_number_is_not_registration_text(host_api, field) -> None:
    body = {"device_type": "cpu", "devices": [{"index": 0, "name": "cpu-0"}], field: 0}
    reply = host_api.post("/api/v1/agent/register/", body, format="json")
    assert reply.status_code == 400
    assert field in reply.json()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/api/v1/hosts/?enabled=null", "enabled"),
        ("/api/v1/snapshots/?known_good_at__isnull=x", "known_good_at__isnull"),
    ],
)
def test_a_boolean_filter_refuses_what_is_not_a_boolean(api, path, field) -> None:
    reply = api.get(path)
    assert reply.status_code == 400
    assert field in reply.json()
    assert api.get(path.split("=")[0] + "=true").status_code == 200


@pytest.mark.django_db
def test_an_error_asked_for_as_csv_is_json_and_says_so(api) -> None:
    reply = api.get("/api/v1/runs/999/metrics/?key=loss&format=csv")
    assert reply.status_code == 404
    assert reply["Content-Type"] == "application/json"
    assert reply.json()["code"] == "not_found"
