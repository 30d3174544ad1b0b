"""The chunked, resumable upload protocol of the agent API, on both storages."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from rest_framework.test import APIClient

from npulab.artifacts.models import Artifact, ArtifactUpload
from npulab.hosts.services import do_issue_host_token
from npulab.runs.models import Run
from tests.conftest import register
from tests.factories import HostFactory
from tests.runs.test_attempts import started

pytestmark = pytest.mark.django_db

PAYLOAD = b"".join(f"line {i} of a trace\n".encode() for i in range(500))


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def uploads_url(run: Run) -> str:
    return f"/api/v1/agent/runs/{run.pk}/uploads/"


def declare(client: APIClient, run: Run, data: bytes = PAYLOAD, **fields: Any) -> Any:
    body = {"name": "trace.json", "kind": "trace", "bytes": len(data), "sha256": sha(data)}
    return client.post(uploads_url(run), {**body, **fields}, format="json")


def send(client: APIClient, run: Run, upload_id: str, offset: int, data: bytes) -> Any:
    return client.put(
        f"{uploads_url(run)}{upload_id}/",
        data,
        content_type="application/octet-stream",
        headers={"Upload-Offset": str(offset)},
    )


def host_client(host: Any) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {do_issue_host_token(host)}")
    return client


@pytest.fixture
def run(owner: Any, cpu_host: Any) -> Run:
    return started(owner, cpu_host)


def test_a_file_sent_in_chunks_is_stored_listed_and_downloaded(store, run, host_api, api) -> None:
    created = declare(host_api, run)
    assert created.status_code == 201
    upload = created.json()
    assert (upload["offset"], upload["bytes"], upload["status"]) == (0, len(PAYLOAD), "uploading")
    assert created["Upload-Offset"] == "0"

    offset = 0
    for size in (4000, 1, 3000):
        reply = send(host_api, run, upload["id"], offset, PAYLOAD[offset : offset + size])
        assert reply.status_code == 200
        offset += size
        assert (reply.json()["offset"], reply.json()["status"]) == (offset, "uploading")
    reply = send(host_api, run, upload["id"], offset, PAYLOAD[offset:])
    assert reply.status_code == 200
    assert reply.json()["status"] == "stored"
    assert store.keys() == [f"runs/{run.pk}/traces/trace.json"]

    listed = api.get(f"/api/v1/runs/{run.pk}/artifacts/").json()
    assert listed["count"] == 1
    artifact = listed["results"][0]
    assert (artifact["name"], artifact["kind"], artifact["bytes"], artifact["status"]) == (
        "trace.json",
        "trace",
        len(PAYLOAD),
        "stored",
    )
    download = api.get(f"/api/v1/runs/{run.pk}/artifacts/{artifact['id']}/download/")
    assert download.status_code == 200
    assert download["Content-Type"] == "application/octet-stream"
    assert 'filename="trace.json"' in download["Content-Disposition"]
    assert b"".join(download.streaming_content) == PAYLOAD


def test_an_interrupted_upload_goes_on_from_the_offset_the_platform_reports(
    store, run, host_api
) -> None:
    upload = declare(host_api, run).json()
    assert send(host_api, run, upload["id"], 0, PAYLOAD[:5000]).status_code == 200
    # The host restarts and knows only the upload's id.
    status = host_api.get(f"{uploads_url(run)}{upload['id']}/")
    assert (status.json()["offset"], status["Upload-Offset"]) == (5000, "5000")
    head = host_api.head(f"{uploads_url(run)}{upload['id']}/")
    assert (head.status_code, head["Upload-Offset"]) == (200, "5000")
    reply = send(host_api, run, upload["id"], 5000, PAYLOAD[5000:])
    assert reply.json()["status"] == "stored"
    assert Artifact.objects.get().status == Artifact.Status.STORED
    # The chunks are gone once the file is whole.
    assert store.keys() == [f"runs/{run.pk}/traces/trace.json"]


def test_a_chunk_at_the_wrong_offset_is_refused_with_the_expected_offset(
    local_store, run, host_api
) -> None:
    upload = declare(host_api, run).json()
    send(host_api, run, upload["id"], 0, PAYLOAD[:100])
    for offset in (0, 50, 200):
        reply = send(host_api, run, upload["id"], offset, PAYLOAD[offset : offset + 100])
        assert reply.status_code == 409
        assert reply.json()["expected_offset"] == 100
    missing = host_api.put(
        f"{uploads_url(run)}{upload['id']}/", b"x", content_type="application/octet-stream"
    )
    assert missing.status_code == 400
    assert ArtifactUpload.objects.get().bytes_received == 100


def test_a_file_that_does_not_match_its_sha256_is_damaged_and_nothing_is_kept(
    store, run, host_api, api
) -> None:
    upload = declare(host_api, run).json()
    corrupted = PAYLOAD[:-1] + b"?"
    send(host_api, run, upload["id"], 0, corrupted[:6000])
    reply = send(host_api, run, upload["id"], 6000, corrupted[6000:])
    assert reply.status_code == 422
    body = reply.json()
    assert body["status"] == "damaged"
    assert body["status_reason"] == (
        f"upload of {len(PAYLOAD)} bytes does not match the declared {len(PAYLOAD)} bytes "
        "and SHA-256"
    )
    assert store.keys() == []
    artifact = Artifact.objects.get()
    assert api.get(f"/api/v1/runs/{run.pk}/artifacts/{artifact.pk}/download/").status_code == 404
    # A finished upload takes no more chunks.
    again = send(host_api, run, upload["id"], len(PAYLOAD), b"x")
    assert (again.status_code, again.json()["status"]) == (409, "damaged")


def test_bytes_past_the_declared_size_damage_the_upload(local_store, run, host_api) -> None:
    upload = declare(host_api, run, data=b"short").json()
    reply = send(host_api, run, upload["id"], 0, b"short and then some")
    assert (reply.status_code, reply.json()["status"]) == (422, "damaged")
    assert local_store.keys() == []


def test_an_artifact_over_the_limit_is_refused_with_413_and_nothing_is_kept(
    store, settings, run, host_api
) -> None:
    settings.NPULAB = dict(settings.NPULAB, MAX_ARTIFACT_BYTES=4096)
    reply = declare(host_api, run)
    assert reply.status_code == 413
    assert reply.json()["detail"] == (
        f"the artifact's {len(PAYLOAD)} bytes exceed the limit of 4096 bytes "
        "(NPULAB_MAX_ARTIFACT_BYTES)"
    )
    assert reply.json()["max_bytes"] == 4096
    assert not Artifact.objects.exists()
    assert store.keys() == []


def test_only_the_host_the_attempt_ran_on_may_upload(local_store, run, host_api, api) -> None:
    other = host_client(register(HostFactory(name="cpu-02"), "cpu", 1))
    assert declare(other, run).status_code == 403
    upload = declare(host_api, run).json()
    assert send(other, run, upload["id"], 0, PAYLOAD).status_code == 403
    assert other.get(f"{uploads_url(run)}{upload['id']}/").status_code == 403
    # A user token is not a host token.
    assert declare(api, run).status_code == 403
    assert host_api.get(f"/api/v1/runs/{run.pk}/artifacts/").status_code == 403


def test_a_declaration_is_checked_field_by_field(local_store, run, host_api) -> None:
    reply = declare(host_api, run, name="../etc/passwd", sha256="xyz", bytes=-1, kind="video")
    assert reply.status_code == 400
    assert set(reply.json()) == {"code", "detail", "name", "sha256", "bytes", "kind"}
    assert host_api.post("/api/v1/agent/runs/999999/uploads/", {}, format="json").status_code in (
        400,
        404,
    )


def test_an_empty_file_is_stored_at_once(local_store, run, host_api) -> None:
    reply = declare(host_api, run, data=b"", name="empty.txt", kind="file")
    assert (reply.status_code, reply.json()["status"]) == (201, "stored")
    assert local_store.keys() == [f"runs/{run.pk}/files/empty.txt"]


def test_the_same_file_uploaded_again_replaces_the_first(store, run, host_api) -> None:
    for _ in range(2):
        upload = declare(host_api, run).json()
        assert send(host_api, run, upload["id"], 0, PAYLOAD).json()["status"] == "stored"
    assert list(Artifact.objects.order_by("pk").values_list("status", "status_reason")) == [
        ("deleted", "replaced by a later upload"),
        ("stored", ""),
    ]
    assert len(store.keys()) == 1


def test_the_list_of_an_unknown_run_is_404(api) -> None:
    assert api.get("/api/v1/runs/999999/artifacts/").status_code == 404


def test_an_abandoned_upload_is_given_up_with_its_chunks(local_store, run, host_api) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from npulab.artifacts.tasks import expire_uploads_task

    upload = declare(host_api, run).json()
    send(host_api, run, upload["id"], 0, PAYLOAD[:1000])
    assert len(local_store.keys()) == 1
    assert expire_uploads_task() == 0
    ArtifactUpload.objects.update(updated=timezone.now() - timedelta(days=3))
    assert expire_uploads_task() == 1
    artifact = Artifact.objects.get()
    assert (artifact.status, artifact.status_reason) == (
        "damaged",
        "upload abandoned: no chunk for 172800 s",
    )
    assert local_store.keys() == []
    # The host that comes back hears it is over.
    status = host_api.get(f"{uploads_url(run)}{upload['id']}/").json()
    assert (status["status"], status["offset"]) == ("damaged", 1000)


def test_a_deleted_run_takes_its_files_along(
    store, run, host_api, django_capture_on_commit_callbacks
) -> None:
    done = declare(host_api, run).json()
    send(host_api, run, done["id"], 0, PAYLOAD)
    waiting = declare(host_api, run, name="other.json").json()
    send(host_api, run, waiting["id"], 0, PAYLOAD[:10])
    assert len(store.keys()) == 2
    with django_capture_on_commit_callbacks(execute=True):
        Run.objects.filter(pk=run.pk).delete()
    assert store.keys() == []


def test_a_name_that_sanitises_to_nothing_is_refused_at_declaration(
    local_store, run, host_api
) -> None:
    # Before: "!!" was accepted, then every chunk failed and the upload stayed for ever.
    reply = declare(host_api, run, name="!!")
    assert reply.status_code == 400
    assert "no letter, digit" in reply.json()["name"][0]
    assert not Artifact.objects.exists()


def test_declarations_past_the_run_quota_the_store_quota_or_the_free_space_are_refused(
    local_store, settings, run, host_api
) -> None:
    size = len(PAYLOAD)
    settings.NPULAB = dict(settings.NPULAB, MAX_RUN_ARTIFACT_BYTES=2 * size)
    assert declare(host_api, run, name="a.json").status_code == 201
    assert declare(host_api, run, name="b.json").status_code == 201
    refused = declare(host_api, run, name="c.json")
    assert refused.status_code == 507
    assert "past its quota" in refused.json()["detail"]
    assert "NPULAB_MAX_RUN_ARTIFACT_BYTES" in refused.json()["detail"]
    settings.NPULAB = dict(
        settings.NPULAB, MAX_RUN_ARTIFACT_BYTES=10**15, MAX_ARTIFACT_STORE_BYTES=2 * size
    )
    assert (
        "NPULAB_MAX_ARTIFACT_STORE_BYTES" in declare(host_api, run, name="d.json").json()["detail"]
    )
    # Five 64 GiB declarations: the disk (with what declared uploads still owe) decides.
    settings.NPULAB = dict(settings.NPULAB, MAX_ARTIFACT_STORE_BYTES=0, MAX_ARTIFACT_BYTES=10**15)
    huge = {"bytes": 64 * 1024**3, "sha256": "0" * 64, "kind": "file"}
    replies = [declare(host_api, run, name=f"big-{n}.bin", **huge) for n in range(5)]
    assert replies[-1].status_code == 507
    assert "the artifact store is full: its disk has room for" in replies[-1].json()["detail"]
    assert settings.NPULAB["ARTIFACT_DIR"] not in replies[-1].content.decode()


def test_a_served_filename_carries_no_bidi_controls(local_store, run, host_api, api) -> None:
    # "report\u202eexe.pdf" would show as "reportfdp.exe" in a browser's download bar.
    upload = declare(host_api, run, name="report\u202efdp.exe", kind="file").json()
    assert send(host_api, run, upload["id"], 0, PAYLOAD).json()["status"] == "stored"
    (artifact,) = api.get(f"/api/v1/runs/{run.pk}/artifacts/").json()["results"]
    download = api.get(f"/api/v1/runs/{run.pk}/artifacts/{artifact['id']}/download/")
    disposition = download["Content-Disposition"]
    assert "\u202e" not in disposition
    assert "%E2%80%AE" not in disposition.upper()
    assert "reportfdp.exe" in disposition


def test_an_mlflow_artifact_keeps_its_folders_in_its_name_only(
    local_store, run, host_api, api
) -> None:
    # What a run's script logged with MLflow: its path under the MLflow run's artifacts.
    name = "trial-0/notes/read me.txt"
    reply = declare(host_api, run, data=b"hello", name=name, kind="mlflow")
    assert reply.status_code == 201
    send(host_api, run, reply.json()["id"], 0, b"hello")
    artifact = api.get(f"/api/v1/runs/{run.pk}/artifacts/", {"kind": "mlflow"}).json()
    assert [(a["name"], a["status"]) for a in artifact["results"]] == [(name, "stored")]
    assert local_store.keys() == [f"runs/{run.pk}/mlflows/trial-0notesread_me.txt"]
    for hostile in ("a/../../b.txt", "/etc/passwd", "a//b", "a/", "./a", "a\\b", "a\x00b"):
        refused = declare(host_api, run, data=b"x", name=hostile, kind="mlflow")
        assert refused.status_code == 400, hostile
        assert "name" in refused.json()
