"""A captured trace's way to a profile: the host worker uploads what the run announced, the
store's signal makes the profile, the control task summarises and indexes it."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from npulab.artifacts.models import Artifact
from npulab.artifacts.services import do_append_chunk, do_create_upload
from npulab.hosts.services import do_issue_host_token
from npulab.profiles.models import Profile
from npulab.profiles.services import do_summarise_profile
from npulab.profiles.timeline.store import stored_name
from npulab.runs.models import Run
from tests.artifacts.test_host_uploader import PlatformOverTestClient
from tests.profiles.conftest import gz
from tests.runs.test_attempts import started
from tests.workers.test_run_cli import by_type, run
from workers.contract.events import TRACE
from workers.contract.tasks import CONTROL_QUEUE, SUMMARISE_PROFILE
from workers.host import artifacts
from workers.host.artifacts import DONE_MARK, ArtifactUploader, artifact_path_problem
from workers.host.client import PlatformClient

pytestmark = pytest.mark.django_db

SMOKE = {"kind": "smoke", "device_type": "cpu", "matmul_size": 64, "train_steps": 6}


@pytest.fixture
def attempt(owner: Any, cpu_host: Any) -> Run:
    return started(owner, cpu_host)


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A real smoke run with a profile, by hand: its run dir and its trace's artifact event."""
    run_dir = tmp_path_factory.mktemp("captured") / "run"
    code, stderr, events = run(dict(SMOKE, profile={"wait": 1, "warmup": 1, "active": 2}), run_dir)
    assert code == 0, stderr
    (event,) = [e for e in by_type(events, "artifact") if e["kind"] == TRACE]
    return run_dir, event


@pytest.fixture(autouse=True)
def as_a_new_run(captured: tuple[Path, dict[str, Any]]) -> None:
    """Each test uploads the module's one capture as a run of its own: the marks an upload
    for the test before left (stored, refused) are not this run's."""
    for mark in captured[0].glob(DONE_MARK.format(key="*")):
        mark.unlink()


def upload(host_api: Any, run_id: int, run_dir: Path, events: list[dict]) -> ArtifactUploader:
    """The uploader's work, in the test's thread (and its database transaction)."""
    uploader = ArtifactUploader(PlatformOverTestClient(host_api), run_id, str(run_dir))
    for event in events:
        uploader.upload(event)
    return uploader


@pytest.mark.django_db(transaction=True)
def test_the_host_uploads_an_announced_trace_and_it_becomes_a_ready_profile(
    profile_store, live_server, owner, cpu_host, captured, sent_tasks
) -> None:
    run_dir, event = captured
    attempt = started(owner, cpu_host)
    client = PlatformClient(live_server.url, do_issue_host_token(cpu_host))
    # As in tests/artifacts: no keep-alive, or the live server's thread keeps the database.
    client._headers["Connection"] = "close"
    uploader = ArtifactUploader(client, attempt.pk, str(run_dir))
    uploader.add(event)
    assert uploader.drain()
    assert uploader.take_refusals() == []
    profile = Profile.objects.select_related("artifact").get()
    assert (profile.source, profile.format, profile.status, profile.name) == (
        "captured",
        "kineto",
        "pending",
        "trace-1.json.gz",
    )
    assert profile.artifact.sha256 == event["sha256"]
    assert profile.bytes == event["bytes"]
    summaries = [(t["args"], t["queue"]) for t in sent_tasks if t["task"] == SUMMARISE_PROFILE]
    assert summaries == [([profile.pk], CONTROL_QUEUE)]
    done = do_summarise_profile(profile.pk)
    assert done.status == Profile.Status.READY, done.error
    assert done.raw_bytes > done.bytes
    # The smoke loop's recorded steps are in its summary.
    assert done.summary["steps"]
    keys = profile_store.keys()
    assert stored_name(done.index_key) in keys


def test_a_trace_over_the_limit_is_refused_when_declared_and_the_run_log_says_why(
    profile_store, settings, attempt, host_api, captured
) -> None:
    run_dir, event = captured
    settings.NPULAB = dict(settings.NPULAB, PROFILE_MAX_BYTES=event["bytes"] - 1)
    uploader = upload(host_api, attempt.pk, run_dir, [event])
    (refusal,) = uploader.take_refusals()
    assert "trace-1.json.gz" in refusal
    assert f"the trace's {event['bytes']} bytes exceed the limit" in refusal
    assert "NPULAB_PROFILE_MAX_BYTES" in refusal
    assert Artifact.objects.count() == 0
    assert Profile.objects.count() == 0
    assert profile_store.keys() == []


def test_the_host_sends_nothing_from_outside_the_run_directory(
    profile_store, attempt, host_api, captured, tmp_path
) -> None:
    run_dir, event = captured
    secret = tmp_path / "secret.txt"
    secret.write_text("the host worker's token")
    escape = run_dir / "profiles" / "escape.json.gz"
    if not escape.exists():
        os.symlink(secret, escape)
    events = [
        dict(event, name="abs.json.gz", path=str(secret)),
        dict(event, name="climb.json.gz", path=str(run_dir / ".." / ".." / secret.name)),
        dict(event, name="escape.json.gz", path=str(escape)),
        dict(event, name="none.json.gz", path=None),
    ]
    uploader = upload(host_api, attempt.pk, run_dir, events)
    refusals = uploader.take_refusals()
    assert len(refusals) == 4
    assert all("not uploaded" in line for line in refusals)
    assert Artifact.objects.count() == 0
    assert artifact_path_problem(str(run_dir), event["path"]) is None
    assert "outside the run directory" in artifact_path_problem(str(run_dir), str(escape))


def test_a_folder_the_run_swaps_for_a_link_after_the_check_leads_nowhere(
    profile_store, attempt, host_api, captured, tmp_path, monkeypatch
) -> None:
    run_dir, event = captured
    # Elsewhere, the very bytes the event declares: only the path keeps them from going.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(event["path"], elsewhere / "trace-1.json.gz")
    # The worker resolved the path while the folder was the run's own; the run, which goes
    # on meanwhile, swaps it for a link to elsewhere before the file is opened.
    before = os.path.realpath(event["path"])
    monkeypatch.setattr(artifacts, "_resolved", lambda run_dir, path: before)
    (run_dir / "profiles").rename(run_dir / "profiles.moved")
    (run_dir / "profiles").symlink_to(elsewhere)
    try:
        uploader = upload(host_api, attempt.pk, run_dir, [event])
    finally:  # the module's tests share the run's folder
        (run_dir / "profiles").unlink()
        (run_dir / "profiles.moved").rename(run_dir / "profiles")
    (refusal,) = uploader.take_refusals()
    assert refusal == "artifact 'trace-1.json.gz' not stored: profiles is a link or no folder"
    assert Artifact.objects.count() == 0


def store_trace(run: Run, name: str, data: bytes) -> Artifact:
    created = do_create_upload(
        run,
        run.attempt,
        name=name,
        kind=TRACE,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
    )
    return do_append_chunk(created.pk, 0, [data]).artifact


def test_a_trace_that_cannot_be_read_leaves_a_failed_profile_with_the_reason(
    profile_store, attempt
) -> None:
    artifact = store_trace(attempt, "trace-1.json.gz", gz(b'{"traceEvents": [{"name": "x", '))
    profile = Profile.objects.get(artifact=artifact)
    done = do_summarise_profile(profile.pk)
    assert done.status == Profile.Status.FAILED
    assert done.error
    assert done.index_key == ""
    keys = profile_store.keys()
    assert [key for key in keys if key.startswith("profiles/")] == []


def test_a_file_announced_as_a_trace_in_another_form_fails_with_what_npulab_reads(
    profile_store, attempt
) -> None:
    artifact = store_trace(attempt, "trace.bin", b"\0\1")
    profile = Profile.objects.get(artifact=artifact)
    assert profile.status == Profile.Status.FAILED
    assert "*.json.gz" in profile.error


def test_summarising_again_replaces_the_index_and_deleting_the_run_deletes_it(
    profile_store, attempt, api, captured, django_capture_on_commit_callbacks
) -> None:
    _, event = captured
    artifact = store_trace(attempt, "trace-1.json.gz", Path(event["path"]).read_bytes())
    profile = do_summarise_profile(Profile.objects.get(artifact=artifact).pk)
    first = stored_name(profile.index_key)
    reply = api.post(f"/api/v1/profiles/{profile.pk}/summarise/")
    assert reply.status_code == 202
    assert reply.json()["status"] == "pending"
    again = do_summarise_profile(profile.pk)
    assert again.status == Profile.Status.READY
    keys = profile_store.keys()
    assert first not in keys
    assert stored_name(again.index_key) in keys
    with django_capture_on_commit_callbacks(execute=True):
        Run.objects.filter(pk=attempt.pk).delete()
    assert profile_store.keys() == []


def test_a_profile_deleted_meanwhile_is_left_alone(profile_store, attempt) -> None:
    artifact = store_trace(attempt, "trace-1.json.gz", gz(b"[]"))
    profile_id = Profile.objects.get(artifact=artifact).pk
    Profile.objects.filter(pk=profile_id).delete()
    assert do_summarise_profile(profile_id) is None
