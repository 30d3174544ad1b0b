"""The artifact store fills up in the middle of a training run: the upload is refused with
a clear error (507 `store_full`), the checkpoint says why it waits, the stored
checkpoints stay intact, and once there is room again every checkpoint is stored and
the run succeeds (issue 14, "The reliability suite").

The store is a real filesystem that fills up: a small tmpfs, which needs root to mount
(CI's container runs as root). The test fills it once the run's first checkpoint is
stored, and the run waits for the fill before it saves the others (full_store_script.py):
they come to a full store however fast the machine trains.
"""

from __future__ import annotations

import errno
import hashlib
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from npulab.artifacts.models import Artifact
from npulab.runs.models import Run
from tests.e2e.conftest import require
from tests.reliability.faults import can_mount, private_redis, small_filesystem
from tests.reliability.stacks import events_once, log_lines, own_database, running_platform
from tests.runs.test_attempts import started
from tests.waiting import wait_until

FULL = "the artifact store is full"
STEPS, EVERY = 50, 5
SCRIPT = Path(__file__).with_name("full_store_script.py")


def fill(directory: Path) -> Path:
    """Write zeros into ``directory`` until its filesystem has no room left."""
    filler = directory / "filler"
    block = bytes(1 << 16)
    with open(filler, "wb", buffering=0) as handle:
        while True:
            try:
                handle.write(block)
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                return filler


def stored_files(store: Path) -> dict[Path, str]:
    return {
        path: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in (store / "runs").rglob("*")
        if path.is_file()
    }


@pytest.fixture
def script() -> Iterator[Path]:
    """full_store_script.py where the run user may read it, and the test leave its file
    beside it (pytest's temporary folders are the tester's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="npulab-rel-scripts-"))
    folder.chmod(0o755)
    path = folder / SCRIPT.name
    shutil.copy(SCRIPT, path)
    path.chmod(0o644)
    yield path
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.e2e
def test_a_full_artifact_store_delays_checkpoints_and_corrupts_nothing(
    tmp_path: Path, script: Path
) -> None:
    require(can_mount(), "mounting a tmpfs needs root")
    broker = private_redis(tmp_path / "redis")
    try:
        with (
            small_filesystem(tmp_path / "store", "16m") as store,
            own_database(tmp_path, "store") as database_url,
            running_platform(
                tmp_path,
                database_url,
                broker.url,
                NPULAB_ARTIFACT_DIR=str(store),
                # A store of 16 MB: the free-space reserve of a real one (1 GiB) would
                # refuse every declaration before the store is full.
                NPULAB_ARTIFACT_FREE_RESERVE_BYTES="0",
            ) as platform,
        ):
            run_id = platform.submit(
                kind="training",
                entry=str(script),
                max_steps=STEPS,
                checkpoint_every_steps=EVERY,
                keep_checkpoints=STEPS // EVERY,
            )["id"]

            def stored() -> list[dict]:
                run = platform.run(run_id)
                assert run["status"] in ("queued", "dispatched", "running"), run
                return [c for c in run["checkpoints"] if c["status"] == "stored"]

            before = wait_until(stored, "a first stored checkpoint", 180)
            filler = fill(store)
            full_at = time.monotonic()
            # The run trains on.
            script.with_name("filled").touch()

            def waiting() -> list[dict]:
                run = platform.run(run_id)
                return [c for c in run["checkpoints"] if FULL in c["status_reason"]]

            refused = wait_until(waiting, "a checkpoint that waits for room", 180)
            said = time.monotonic() - full_at
            reason = refused[0]["status_reason"]
            assert refused[0]["status"] == "on_host"
            # What was stored before is still whole, and served.
            for checkpoint in before:
                download = platform.api(
                    "GET", f"runs/{run_id}/checkpoints/{checkpoint['step']}/download/"
                )
                assert download.status_code == 200, download.text
                assert hashlib.sha256(download.content).hexdigest() == checkpoint["sha256"]

            filler.unlink()
            freed_at = time.monotonic()
            run = platform.wait(run_id, timeout=300)
            recovered = time.monotonic() - freed_at
            assert run["status"] == "succeeded", (run, platform.tail())
            assert [a["number"] for a in run["attempts"]] == [1]
            checkpoints = {c["step"]: c for c in run["checkpoints"]}
            assert sorted(checkpoints) == list(range(EVERY - 1, STEPS, EVERY))
            assert {c["status"] for c in checkpoints.values()} == {"stored"}, checkpoints
            assert all(c["status_reason"] == "" for c in checkpoints.values())
            # Nothing half-written is left in the store: each file is a whole checkpoint.
            files = stored_files(store)
            assert sorted(files.values()) == sorted(c["sha256"] for c in checkpoints.values())
            assert [path for path in (store / "uploads").rglob("*") if path.is_file()] == []
            retries = [line for line in log_lines(platform, "worker-e2e-cpu") if "HTTP 507" in line]
            assert retries, platform.tail()
            lost, duplicated = events_once(platform, run_id)
            print(
                f"injected: the artifact store's filesystem filled after {len(before)} stored "
                f"checkpoint(s); measured: the checkpoint said why it waits {said:.1f} s later "
                f"({reason!r}), {len(retries)} upload retries (one line each), the stored "
                f"checkpoints verified; room freed: the run succeeded {recovered:.1f} s later "
                f"with all {len(checkpoints)} checkpoints stored and verified; "
                f"events lost {lost}, duplicated {duplicated}"
            )
            assert (lost, duplicated) == (0, 0)
    finally:
        broker.stop()


@pytest.fixture
def full_store(settings, tmp_path: Path):
    require(can_mount(), "mounting a tmpfs needs root")
    with small_filesystem(tmp_path / "store", "1m") as store:
        settings.NPULAB = dict(
            settings.NPULAB, ARTIFACT_DIR=str(store), ARTIFACT_FREE_RESERVE_BYTES=0
        )
        yield store


@pytest.mark.django_db
def test_a_chunk_the_full_store_cannot_take_is_refused_and_nothing_is_kept(
    owner, cpu_host, host_api: APIClient, full_store: Path
) -> None:
    client = host_api
    run = started(owner, cpu_host)
    first = b"a" * 1000
    stored = upload(client, run, "first.bin", first)
    assert stored["status"] == "stored"
    data = b"b" * 200_000
    # Declared while there was room; the store fills before its bytes come (a declaration
    # the store has no room for is refused at once: test_uploads).
    declared = declare(client, run, "second.bin", data).json()
    filler = fill(full_store)
    refused = send(client, run, declared["id"], 0, data)
    assert refused.status_code == 507
    body = refused.json()
    assert body["code"] == "store_full"
    assert body["detail"].startswith(
        f"{FULL} (No space left on device); the upload stays at byte 0"
    )
    assert body["expected_offset"] == 0
    artifact = Artifact.objects.get(name="second.bin")
    assert (artifact.status, artifact.upload.bytes_received) == ("uploading", 0)
    assert artifact.status_reason == body["detail"]
    # Nothing half-written: the store holds the first file, whole, and the filler.
    files = stored_files(full_store)
    assert sorted(files.values()) == [hashlib.sha256(first).hexdigest()]
    assert [p for p in (full_store / "uploads").rglob("*") if p.is_file()] == []
    filler.unlink()
    done = send(client, run, declared["id"], 0, data)
    assert done.status_code == 200, done.json()
    artifact.refresh_from_db()
    assert (artifact.status, artifact.status_reason) == ("stored", "")


def declare(client: APIClient, run: Run, name: str, data: bytes) -> Any:
    body = {
        "name": name,
        "kind": "trace",
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    return client.post(f"/api/v1/agent/runs/{run.pk}/uploads/", body, format="json")


def send(client: APIClient, run: Run, upload_id: str, offset: int, data: bytes) -> Any:
    return client.put(
        f"/api/v1/agent/runs/{run.pk}/uploads/{upload_id}/",
        data,
        content_type="application/octet-stream",
        headers={"Upload-Offset": str(offset)},
    )


def upload(client: APIClient, run: Run, name: str, data: bytes) -> dict[str, Any]:
    declared = declare(client, run, name, data).json()
    assert "id" in declared, declared
    return send(client, run, declared["id"], 0, data).json()
