"""Checkpoints through the artifact store: uploads, retention, downloads, the resume point."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace
from typing import Any

import pytest

from npulab.artifacts.models import Artifact
from npulab.artifacts.services import do_apply_retention, retention_drops
from npulab.checkpoints.models import Checkpoint
from npulab.checkpoints.services import record_checkpoint
from npulab.runs.models import Run
from npulab.runs.scheduler import place_queued_runs
from tests.artifacts.test_uploads import send, sha
from tests.runs.test_attempts import crash, started

pytestmark = pytest.mark.django_db


def checkpoint(run: Run, step: int, payload: bytes) -> Checkpoint:
    event = {"step": step, "path": f"/w/step-{step}", "bytes": len(payload), "sha256": sha(payload)}
    return record_checkpoint(run, event)


def chunked(host_api: Any, run: Run, step: int, payload: bytes, chunk: int = 700) -> Any:
    declared = {
        "name": "state.pt",
        "kind": "checkpoint",
        "step": step,
        "bytes": len(payload),
        "sha256": sha(payload),
    }
    reply = host_api.post(f"/api/v1/agent/runs/{run.pk}/uploads/", declared, format="json")
    assert reply.status_code == 201, reply.json()
    upload = reply.json()
    for offset in range(0, len(payload), chunk):
        reply = send(host_api, run, upload["id"], offset, payload[offset : offset + chunk])
    return reply


def single_put(host_api: Any, run: Run, step: int, payload: bytes) -> Any:
    return host_api.put(
        f"/api/v1/agent/runs/{run.pk}/checkpoints/{step}/",
        payload,
        content_type="application/octet-stream",
    )


def test_a_checkpoint_sent_in_chunks_is_stored_resumed_from_and_downloaded(
    store, owner, cpu_host, host_api, api
) -> None:
    run = started(owner, cpu_host, max_restarts=1)
    payload = b"weights " * 1000
    checkpoint(run, 49, payload)
    assert chunked(host_api, run, 49, payload).json()["status"] == "stored"
    stored = Checkpoint.objects.get(run=run, step=49)
    assert stored.status == Checkpoint.Status.STORED
    assert stored.artifact.storage_key == f"runs/{run.pk}/checkpoints/49/state.pt"
    assert store.keys() == [f"runs/{run.pk}/checkpoints/49/state.pt"]

    download = api.get(f"/api/v1/runs/{run.pk}/checkpoints/49/download/")
    assert b"".join(download.streaming_content) == payload

    run = crash(cpu_host, run)
    place_queued_runs()
    claim = host_api.post(f"/api/v1/agent/runs/{run.pk}/claim/", {"attempt": 2}, format="json")
    assert claim.json()["resume"] == {"step": 49, "bytes": len(payload), "sha256": sha(payload)}
    fetched = host_api.get(f"/api/v1/agent/runs/{run.pk}/checkpoints/49/")
    assert b"".join(fetched.streaming_content) == payload


def test_the_single_put_upload_writes_through_the_store(store, owner, cpu_host, host_api) -> None:
    run = started(owner, cpu_host)
    checkpoint(run, 5, b"good bytes")
    assert single_put(host_api, run, 5, b"good bytes").status_code == 201
    artifact = Artifact.objects.get()
    assert (artifact.kind, artifact.step, artifact.status) == ("checkpoint", 5, "stored")
    assert Checkpoint.objects.get().artifact == artifact
    assert store.keys() == [f"runs/{run.pk}/checkpoints/5/state.pt"]


def test_a_short_single_put_is_damaged_and_nothing_is_kept(
    local_store, owner, cpu_host, host_api
) -> None:
    run = started(owner, cpu_host)
    checkpoint(run, 5, b"good bytes")
    reply = single_put(host_api, run, 5, b"good")
    assert reply.status_code == 422
    assert reply.json()["detail"] == (
        "upload of 4 bytes does not match the checkpoint's 10 bytes and SHA-256"
    )
    assert Artifact.objects.get().status == Artifact.Status.DAMAGED
    assert local_store.keys() == []


def test_a_checkpoint_over_the_limit_is_refused_with_413(
    local_store, settings, owner, cpu_host, host_api
) -> None:
    settings.NPULAB = dict(settings.NPULAB, MAX_ARTIFACT_BYTES=1024)
    run = started(owner, cpu_host)
    payload = b"x" * 2048
    checkpoint(run, 7, payload)
    reply = single_put(host_api, run, 7, payload)
    assert reply.status_code == 413
    assert "limit of 1024 bytes (NPULAB_MAX_ARTIFACT_BYTES)" in reply.json()["detail"]
    assert Checkpoint.objects.get().status == Checkpoint.Status.ON_HOST
    assert not Artifact.objects.exists()
    assert local_store.keys() == []


def test_a_checkpoint_the_full_store_refuses_at_declaration_says_why_it_waits(
    local_store, settings, owner, cpu_host, host_api
) -> None:
    run = started(owner, cpu_host)
    payload = b"x" * 2048
    checkpoint(run, 7, payload)
    # The disk's free space less the reserve is short of the checkpoint.
    settings.NPULAB = dict(settings.NPULAB, ARTIFACT_FREE_RESERVE_BYTES=10**18)
    declared = {"name": "state.pt", "kind": "checkpoint", "step": 7, "bytes": len(payload)}
    reply = host_api.post(
        f"/api/v1/agent/runs/{run.pk}/uploads/", dict(declared, sha256=sha(payload)), format="json"
    )
    assert reply.status_code == 507
    assert reply.json()["code"] == "store_full"
    waiting = Checkpoint.objects.get()
    assert waiting.status == Checkpoint.Status.ON_HOST
    assert waiting.status_reason == reply.json()["detail"]
    assert waiting.status_reason.startswith("the artifact store is full")
    assert not Artifact.objects.exists()
    # Room again: the same declaration goes through and the reason goes with the upload.
    settings.NPULAB = dict(settings.NPULAB, ARTIFACT_FREE_RESERVE_BYTES=0)
    assert chunked(host_api, run, 7, payload).json()["status"] == "stored"
    stored = Checkpoint.objects.get()
    assert (stored.status, stored.status_reason) == (Checkpoint.Status.STORED, "")


def test_a_chunked_checkpoint_must_match_its_event(local_store, owner, cpu_host, host_api) -> None:
    run = started(owner, cpu_host)
    checkpoint(run, 3, b"the real one")
    declared = {"name": "state.pt", "kind": "checkpoint", "step": 3, "bytes": 5, "sha256": "0" * 64}
    reply = host_api.post(f"/api/v1/agent/runs/{run.pk}/uploads/", declared, format="json")
    assert reply.status_code == 422
    assert "declared 12 bytes" in reply.json()["detail"]
    missing = dict(declared, step=4)
    reply = host_api.post(f"/api/v1/agent/runs/{run.pk}/uploads/", missing, format="json")
    assert reply.status_code == 404


def test_a_damaged_chunked_checkpoint_is_never_a_resume_point(
    store, owner, cpu_host, host_api
) -> None:
    run = started(owner, cpu_host)
    payload = b"weights " * 300
    checkpoint(run, 9, payload)
    declared = {
        "name": "state.pt",
        "kind": "checkpoint",
        "step": 9,
        "bytes": len(payload),
        "sha256": sha(payload),
    }
    upload = host_api.post(f"/api/v1/agent/runs/{run.pk}/uploads/", declared, format="json").json()
    reply = send(host_api, run, upload["id"], 0, payload[::-1])
    assert reply.status_code == 422
    damaged = Checkpoint.objects.get()
    assert damaged.status == Checkpoint.Status.DAMAGED
    assert "does not match" in damaged.status_reason
    assert store.keys() == []


# -- retention -----------------------------------------------------------------------


def fake(kind: str, step: int | None, pinned: bool = False, status: str = "stored") -> Any:
    return SimpleNamespace(kind=kind, step=step, pinned=pinned, status=status, created=0, pk=step)


def test_the_policy_keeps_the_newest_checkpoints_the_pinned_and_every_other_kind() -> None:
    artifacts = [
        fake("checkpoint", 10, pinned=True),
        fake("checkpoint", 20),
        fake("checkpoint", 30),
        fake("checkpoint", 40),
        fake("checkpoint", 50, status="damaged"),
        fake("trace", 1),
        fake("report", None),
    ]
    assert [a.step for a in retention_drops(artifacts, keep_checkpoints=2)] == [20]
    assert [a.step for a in retention_drops(artifacts, keep_checkpoints=1)] == [30, 20]
    assert retention_drops(artifacts, keep_checkpoints=10) == []


def test_retention_deletes_the_files_it_drops(store, owner, cpu_host, host_api, api) -> None:
    run = started(owner, cpu_host, keep_checkpoints=1)
    payloads = {step: f"weights at {step}".encode() * 50 for step in (10, 20, 30)}
    for step, payload in payloads.items():
        checkpoint(run, step, payload)
    assert chunked(host_api, run, 10, payloads[10]).json()["status"] == "stored"
    assert api.post(f"/api/v1/runs/{run.pk}/checkpoints/10/pin/").json()["pinned"] is True
    chunked(host_api, run, 20, payloads[20])
    chunked(host_api, run, 30, payloads[30])
    assert list(run.checkpoints.values_list("step", "status")) == [
        (30, "stored"),
        (20, "deleted"),
        (10, "stored"),
    ]
    assert store.keys() == [
        f"runs/{run.pk}/checkpoints/10/state.pt",
        f"runs/{run.pk}/checkpoints/30/state.pt",
    ]
    api.delete(f"/api/v1/runs/{run.pk}/checkpoints/10/pin/")
    assert store.keys() == [f"runs/{run.pk}/checkpoints/30/state.pt"]
    assert list(
        Artifact.objects.filter(run=run).order_by("step").values_list("step", "status_reason")
    ) == [
        (10, "beyond the run's keep_checkpoints"),
        (20, "beyond the run's keep_checkpoints"),
        (30, ""),
    ]
    # Other kinds are kept whatever keep_checkpoints says.
    assert do_apply_retention(run, 0) == [Artifact.objects.get(step=30)]


def test_a_checkpoint_stored_before_the_store_keeps_its_file(local_store, owner, cpu_host) -> None:
    """The runs 0007 migration's data step: an artifact row at the file's existing key."""
    from importlib import import_module

    from django.db import connection
    from django.db.migrations.loader import MigrationLoader

    migration = import_module("npulab.runs.migrations.0007_checkpoint_artifact")
    # The models as that migration saw them: Checkpoint was the runs app's then.
    state = MigrationLoader(connection).project_state(("runs", "0007_checkpoint_artifact"))
    run = started(owner, cpu_host)
    old = checkpoint(run, 5, b"old bytes")
    Checkpoint.objects.filter(pk=old.pk).update(status="stored", pinned=True)
    migration.stored_checkpoints_to_artifacts(state.apps, None)
    artifact = Checkpoint.objects.get(pk=old.pk).artifact
    assert (artifact.storage_key, artifact.status, artifact.pinned, artifact.sha256) == (
        f"runs/{run.pk}/checkpoints/5/state.pt",
        "stored",
        True,
        hashlib.sha256(b"old bytes").hexdigest(),
    )
