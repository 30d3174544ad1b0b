from __future__ import annotations

import json

import pytest

from npulab.snapshots.models import Snapshot
from npulab.snapshots.services import do_record_snapshot
from tests.conftest import make_operator

pytestmark = pytest.mark.django_db
UPLOAD = "/api/v1/agent/snapshots/"


def test_upload_new_then_unchanged(host_api, document) -> None:
    first = host_api.post(UPLOAD, {"snapshot": document()}, format="json")
    assert first.status_code == 201
    assert first.json()["change"] == "first snapshot"
    again = host_api.post(UPLOAD, {"snapshot": document()}, format="json")
    assert again.status_code == 200
    assert again.json()["new_version"] is False
    assert again.json()["hash"] == first.json()["hash"]


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"snapshot": [1, 2]}, "must be a JSON object"),
        (
            {"snapshot": {"schema": 1}},
            "missing section(s): host, npu, ascend, python, env, cuda, findings",
        ),
    ],
)
def test_uploads_that_are_not_snapshots_get_400_and_store_nothing(host_api, body, error) -> None:
    response = host_api.post(UPLOAD, body, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "code": "invalid",
        "detail": f"snapshot: {error}",
        "snapshot": [error],
    }
    assert Snapshot.objects.count() == 0


def test_malformed_json_is_400(host_api) -> None:
    response = host_api.generic("POST", UPLOAD, "{not json", content_type="application/json")
    assert response.status_code == 400


def test_an_oversized_upload_is_refused_and_nothing_changes(host_api, document, settings) -> None:
    host_api.post(UPLOAD, {"snapshot": document()}, format="json")
    settings.NPULAB = dict(settings.NPULAB, MAX_SNAPSHOT_BYTES=64 * 1024)
    huge = document(packages={f"pkg-{i}": "1.0" for i in range(5000)})
    response = host_api.post(UPLOAD, {"snapshot": huge}, format="json")
    assert response.status_code == 413
    assert "over the limit of 65536 bytes" in response.json()["detail"]
    assert Snapshot.objects.count() == 1


def test_users_cannot_upload_snapshots(api, document) -> None:
    assert api.post(UPLOAD, {"snapshot": document()}, format="json").status_code == 403


def test_list_detail_and_compatibility(api, cpu_host, document) -> None:
    snapshot = do_record_snapshot(cpu_host, document()).snapshot
    listing = api.get("/api/v1/snapshots/", {"host__name": "cpu-01"}).json()
    assert [s["hash"] for s in listing["results"]] == [snapshot.content_hash]
    detail = api.get(f"/api/v1/snapshots/{snapshot.pk}/").json()
    assert detail["summary"]["cann"] == "8.1.RC1"
    assert detail["compatibility"]["verdict"] == "ok"
    assert [p["pair"] for p in detail["compatibility"]["stack"]] == [
        "driver 25.0.rc1.1 ↔ firmware 7.7.0.1.231",
        "driver 25.0.rc1.1 ↔ CANN toolkit 8.1.RC1",
    ]
    assert detail["data"]["npu"]["tool_version"] == "25.2.0"


def test_diff_over_the_api(api, cpu_host, document) -> None:
    a = do_record_snapshot(cpu_host, document(torch_npu="2.1.0.post8")).snapshot
    b = do_record_snapshot(cpu_host, document(torch_npu="2.5.1")).snapshot
    body = api.get("/api/v1/snapshots/diff/", {"a": a.pk, "b": b.pk}).json()
    assert body["versions"] == [{"name": "torch_npu", "from": "2.1.0.post8", "to": "2.5.1"}]
    missing = api.get("/api/v1/snapshots/diff/", {"a": a.pk})
    assert missing.status_code == 400
    assert "b" in missing.json()
    assert api.get("/api/v1/snapshots/diff/", {"a": a.pk, "b": 999999}).status_code == 400


def test_known_good_mark_and_unmark(api, owner, cpu_host, document) -> None:
    make_operator(owner)
    snapshot = do_record_snapshot(cpu_host, document()).snapshot
    url = f"/api/v1/snapshots/{snapshot.pk}/known-good/"
    marked = api.post(url, {"note": "nightly smoke green for a week"}, format="json").json()
    assert (marked["known_good"], marked["known_good_by"], marked["known_good_note"]) == (
        True,
        "owner",
        "nightly smoke green for a week",
    )
    assert api.get("/api/v1/snapshots/", {"known_good_at__isnull": "false"}).json()["count"] == 1
    assert api.post(url, {"note": "x" * 2001}, format="json").status_code == 400
    assert api.delete(url).json()["known_good"] is False


def test_rollback_recipe(api, cpu_host, document) -> None:
    snapshot = do_record_snapshot(cpu_host, document(torch="2.5.1", torch_npu="2.5.1")).snapshot
    recipe = api.get(f"/api/v1/snapshots/{snapshot.pk}/rollback/").json()
    assert (recipe["driver"], recipe["firmware"]) == ("25.0.rc1.1", "7.7.0.1.231")
    assert recipe["cann"][0]["version"] == "8.1.RC1"
    assert "torch-npu==2.5.1\n" in recipe["requirements"]
    text = api.get(f"/api/v1/snapshots/{snapshot.pk}/requirements/")
    assert text["Content-Type"].startswith("text/plain")
    lines = text.content.decode().splitlines()
    assert lines[0].startswith(f"# npulab snapshot {snapshot.short_hash} of host cpu-01")
    assert "torch==2.5.1" in lines


def test_history_and_snapshot_request(api, owner, host_api, cpu_host, document) -> None:
    make_operator(owner)
    do_record_snapshot(cpu_host, document(torch_npu="2.1.0.post8"))
    do_record_snapshot(cpu_host, document(torch_npu="2.5.1"))
    history = api.get("/api/v1/hosts/cpu-01/history/").json()
    assert [v["change"] for v in history["results"]] == [
        "torch_npu 2.1.0.post8 → 2.5.1, ~1 packages",
        "first snapshot",
    ]
    assert api.get("/api/v1/hosts/nope/history/").status_code == 404
    beat = {"running": []}
    assert (
        host_api.post("/api/v1/agent/heartbeat/", beat, format="json").json()["snapshot"] is False
    )
    assert api.post("/api/v1/hosts/cpu-01/snapshot-request/").status_code == 202
    assert host_api.post("/api/v1/agent/heartbeat/", beat, format="json").json()["snapshot"] is True


def test_upgrade_review_needs_a_snapshot_and_one_target(api, cpu_host, document) -> None:
    url = "/api/v1/hosts/cpu-01/upgrade-review/"
    assert api.get(url, {"cann": "8.3.RC1"}).status_code == 409
    current = do_record_snapshot(cpu_host, document()).snapshot
    assert api.get(url).status_code == 400
    both = api.get(url, {"target": current.pk, "cann": "8.3.RC1"})
    assert both.status_code == 400
    assert "not both" in json.dumps(both.json())
