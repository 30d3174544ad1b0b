"""The host worker's side: chunked uploads through outages and restarts, checkpoint uploads."""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import pytest

from npulab.artifacts.models import Artifact
from npulab.checkpoints.models import Checkpoint
from npulab.checkpoints.services import record_checkpoint
from npulab.hosts.services import do_issue_host_token
from tests.artifacts.test_uploads import PAYLOAD, sha
from tests.runs.test_attempts import started
from workers.host.checkpoints import CheckpointUploader, apply_pins
from workers.host.client import PlatformClient, PlatformUnavailable
from workers.host.uploads import ChunkedUpload, UploadRefused, UploadStopped, upload_file
from workers.track import checkpoint as checkpoints


class PlatformOverTestClient(PlatformClient):
    """The real client over Django's test client, with outages where a test asks for them.

    ``faults`` maps a call's number (from 0) to ``"before"`` (the request never
    arrives), ``"after"`` (it is handled, its reply is lost) or a callable run
    before the request.
    """

    def __init__(self, api: Any, faults: dict[int, Any] | None = None) -> None:
        super().__init__("http://testserver", "unused")
        self.api = api
        self.faults = dict(faults or {})
        self.calls: list[tuple[str, str, str | None]] = []

    def _request(self, method: str, url: str, **kwargs: Any) -> dict[str, Any]:
        number = len(self.calls)
        headers = kwargs.get("headers") or {}
        path = url[len(self.url) :]
        self.calls.append((method, path.rsplit("/", 2)[-2], headers.get("Upload-Offset")))
        fault = self.faults.get(number)
        if callable(fault):
            fault()
        if fault == "before":
            raise PlatformUnavailable("connection refused")
        if "json" in kwargs:
            body, content_type = json.dumps(kwargs["json"]), "application/json"
        else:
            body, content_type = kwargs.get("data") or b"", headers.get("Content-Type")
        extra = (
            {"HTTP_UPLOAD_OFFSET": headers["Upload-Offset"]} if "Upload-Offset" in headers else {}
        )
        response = self.api.generic(method, path, body, content_type=content_type, **extra)
        if fault == "after":
            raise PlatformUnavailable("read timed out")
        self._check(response, url)
        return response.json()


@pytest.fixture
def trace(tmp_path) -> str:
    path = tmp_path / "trace.json"
    path.write_bytes(PAYLOAD)
    return str(path)


@pytest.mark.django_db
def test_an_upload_goes_on_through_outages_from_the_platforms_offset(
    local_store, owner, cpu_host, host_api, trace
) -> None:
    run = started(owner, cpu_host)
    # Call 0 declares; 1 sends bytes 0-999; 2 never arrives; 4 arrives, its reply is lost.
    client = PlatformOverTestClient(host_api, faults={2: "before", 4: "after"})
    done = upload_file(client, run.pk, trace, "trace.json", "trace", chunk_bytes=1000, delay_s=0.01)
    assert done["status"] == "stored"
    assert Artifact.objects.get().sha256 == sha(PAYLOAD)
    assert local_store.keys() == [f"runs/{run.pk}/traces/trace.json"]
    assert [(method, offset) for method, _, offset in client.calls[:7]] == [
        ("POST", None),
        ("PUT", "0"),
        ("PUT", "1000"),  # the platform was down
        ("GET", None),  # asks where the upload is
        ("PUT", "1000"),  # stored, but the reply was lost
        ("GET", None),
        ("PUT", "2000"),
    ]


@pytest.mark.django_db
def test_an_upload_stopped_midway_resumes_after_a_restart(
    local_store, owner, cpu_host, host_api, trace, tmp_path
) -> None:
    run = started(owner, cpu_host)
    state = str(tmp_path / "trace.upload.json")
    give_up = threading.Event()
    first = PlatformOverTestClient(host_api, faults={3: give_up.set})
    declaration = {"name": "trace.json", "kind": "trace"}
    with pytest.raises(UploadStopped):
        ChunkedUpload(
            first, run.pk, trace, declaration, state_path=state, chunk_bytes=1000, give_up=give_up
        ).run()
    assert os.path.exists(state)

    # A new host worker process: same file, same state file.
    again = PlatformOverTestClient(host_api)
    done = ChunkedUpload(
        again, run.pk, trace, declaration, state_path=state, chunk_bytes=1000
    ).run()
    assert done["status"] == "stored"
    assert [(method, offset) for method, _, offset in again.calls[:2]] == [
        ("GET", None),
        ("PUT", "3000"),
    ]
    assert Artifact.objects.count() == 1
    assert not os.path.exists(state)


@pytest.mark.django_db
def test_a_refused_upload_is_not_retried(
    local_store, settings, owner, cpu_host, host_api, trace
) -> None:
    settings.NPULAB = dict(settings.NPULAB, MAX_ARTIFACT_BYTES=1024)
    run = started(owner, cpu_host)
    client = PlatformOverTestClient(host_api)
    with pytest.raises(UploadRefused) as refused:
        upload_file(client, run.pk, trace, "trace.json", "trace")
    assert refused.value.status == 413
    assert len(client.calls) == 1


def write_checkpoint(directory: str, step: int, payload: bytes) -> None:
    folder = os.path.join(directory, checkpoints.step_dir_name(step))
    os.makedirs(folder)
    with open(os.path.join(folder, checkpoints.STATE_FILE), "wb") as handle:
        handle.write(payload)
    manifest = {
        "format": checkpoints.FORMAT,
        "step": step,
        "files": {checkpoints.STATE_FILE: {"bytes": len(payload), "sha256": sha(payload)}},
    }
    with open(os.path.join(folder, checkpoints.MANIFEST_FILE), "w") as handle:
        json.dump(manifest, handle)


@pytest.mark.django_db(transaction=True)
def test_the_checkpoint_uploader_sends_checkpoints_in_chunks_over_http(
    local_store, live_server, owner, cpu_host, tmp_path
) -> None:
    run = started(owner, cpu_host)
    payload = os.urandom(10_000)
    directory = str(tmp_path / "checkpoints")
    write_checkpoint(directory, 99, payload)
    record_checkpoint(run, {"step": 99, "bytes": len(payload), "sha256": sha(payload)})
    client = PlatformClient(live_server.url, do_issue_host_token(cpu_host))
    # The uploader's thread keeps its keep-alive session for good, and the live server's
    # request thread its database connection with it: the test database could not be dropped.
    client._headers["Connection"] = "close"
    uploader = CheckpointUploader(client, run.pk, directory, chunk_bytes=3000)
    uploader.add(99)
    assert uploader.drain()
    stored = Checkpoint.objects.get(run=run, step=99)
    assert stored.status == Checkpoint.Status.STORED
    assert local_store.keys() == [f"runs/{run.pk}/checkpoints/99/state.pt"]
    # Uploaded: marked settled, so the host's retention may prune it now.
    assert sorted(os.listdir(directory)) == [
        f".settled-{checkpoints.step_dir_name(99)}",
        checkpoints.step_dir_name(99),
    ]
    assert checkpoints.settled(directory, 99)
    destination = str(tmp_path / "fetched.pt")
    client.download_checkpoint(run.pk, 99, destination)
    with open(destination, "rb") as handle:
        assert handle.read() == payload


@pytest.mark.django_db(transaction=True)
def test_the_sweep_sends_the_checkpoints_whose_events_the_uploader_never_saw(
    local_store, live_server, owner, cpu_host, tmp_path
) -> None:
    run = started(owner, cpu_host)
    directory = str(tmp_path / "checkpoints")
    payloads = {step: os.urandom(2000) for step in (10, 20, 30)}
    for step, payload in payloads.items():
        write_checkpoint(directory, step, payload)
    # The platform stored 10 and 20's events (the forwarder jumped past them on a 409
    # resync, so nobody queued their uploads); 30's event never reached it (lost with an
    # earlier worker's spool), so the platform refuses it: it knows no such checkpoint.
    for step in (10, 20):
        record_checkpoint(run, {"step": step, "bytes": 2000, "sha256": sha(payloads[step])})
    checkpoints.settle(directory, 10)  # and 10 went up already
    client = PlatformClient(live_server.url, do_issue_host_token(cpu_host))
    client._headers["Connection"] = "close"
    uploader = CheckpointUploader(client, run.pk, directory, chunk_bytes=3000)

    assert uploader.sweep() == [(20, 0), (30, 0)]
    assert uploader.drain()

    assert list(run.checkpoints.order_by("step").values_list("step", "status")) == [
        (10, "on_host"),
        (20, "stored"),
    ]
    assert local_store.keys() == [f"runs/{run.pk}/checkpoints/20/state.pt"]
    # Refused for good, 30 is settled too: the host's retention may prune it.
    assert all(checkpoints.settled(directory, step) for step in (10, 20, 30))
    assert uploader.sweep() == []


@pytest.mark.django_db(transaction=True)
def test_the_worker_reads_and_marks_nothing_through_a_link_the_run_left_in_its_checkpoints(
    local_store, live_server, owner, cpu_host, tmp_path
) -> None:
    run = started(owner, cpu_host)
    # Another run's checkpoints on this host: closed to this run's user, not to the worker.
    other = tmp_path / "other" / "checkpoints"
    payload = os.urandom(5000)
    write_checkpoint(str(other), 99, payload)
    write_checkpoint(str(other / "rank-1"), 99, payload)
    before = sorted(str(path.relative_to(other)) for path in other.rglob("*"))
    # This run links its step folder, and a shard folder, to the other run's.
    directory = tmp_path / "checkpoints"
    directory.mkdir()
    (directory / checkpoints.step_dir_name(99)).symlink_to(other / checkpoints.step_dir_name(99))
    (directory / "rank-1").symlink_to(other / "rank-1")
    record_checkpoint(run, {"step": 99, "bytes": len(payload), "sha256": sha(payload)})
    client = PlatformClient(live_server.url, do_issue_host_token(cpu_host))
    client._headers["Connection"] = "close"
    uploader = CheckpointUploader(client, run.pk, str(directory), chunk_bytes=3000)
    uploader.add(99)
    uploader.add(99, rank=1)
    assert uploader.drain()
    apply_pins(str(directory), [99])
    # The whole folder a link, after the worker made it a real one before the run.
    swapped = tmp_path / "swapped"
    swapped.symlink_to(other)
    apply_pins(str(swapped), [99])
    swept = CheckpointUploader(client, run.pk, str(swapped)).sweep()

    assert local_store.keys() == []
    assert run.checkpoints.get(step=99).status == Checkpoint.Status.ON_HOST
    assert sorted(str(path.relative_to(other)) for path in other.rglob("*")) == before
    assert swept == []


@pytest.mark.django_db
def test_a_host_back_after_its_upload_expired_sends_the_file_again(
    local_store, owner, cpu_host, host_api, trace, tmp_path
) -> None:
    from npulab.artifacts.services import do_expire_uploads

    run = started(owner, cpu_host)
    state = str(tmp_path / "trace.upload.json")
    give_up = threading.Event()
    first = PlatformOverTestClient(host_api, faults={2: give_up.set})
    declaration = {"name": "trace.json", "kind": "trace"}
    with pytest.raises(UploadStopped):
        ChunkedUpload(
            first, run.pk, trace, declaration, state_path=state, chunk_bytes=1000, give_up=give_up
        ).run()
    assert do_expire_uploads(0) == 1
    again = PlatformOverTestClient(host_api)
    done = ChunkedUpload(again, run.pk, trace, declaration, state_path=state).run()
    assert done["status"] == "stored"
    assert [method for method, _, _ in again.calls] == ["GET", "POST", "PUT"]
    assert list(Artifact.objects.order_by("pk").values_list("status", flat=True)) == [
        "damaged",
        "stored",
    ]
