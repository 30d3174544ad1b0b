"""Importing a trace made elsewhere: the API and the run page's form, the size limits, and an
archive's safety. A refused trace leaves nothing behind: no row, no file, no scratch copy."""

from __future__ import annotations

import gzip
import hashlib
import os
import tarfile
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from npulab.artifacts.models import Artifact
from npulab.profiles.models import Profile
from npulab.profiles.services import do_summarise_profile
from npulab.profiles.timeline.store import stored_name
from tests.profiles.conftest import ascend_folder, gz, member, tar_bytes
from tests.runs.test_attempts import started
from workers.contract.tasks import CONTROL_QUEUE, SUMMARISE_PROFILE

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(owner: Any, cpu_host: Any) -> Any:
    return started(owner, cpu_host)


def post(client: Any, run: Any, name: str, data: bytes) -> Any:
    upload = SimpleUploadedFile(name, data, content_type="application/octet-stream")
    return client.post(f"/api/v1/runs/{run.pk}/profiles/", {"file": upload}, format="multipart")


def nothing_kept(store: Any, settings: Any) -> None:
    assert Artifact.objects.count() == 0
    assert Profile.objects.count() == 0
    assert store.keys() == []
    work = settings.NPULAB["PROFILE_WORK_DIR"]
    assert not os.path.isdir(work) or os.listdir(work) == []


def test_a_kineto_trace_is_imported_stored_gzipped_and_summarised(
    profile_store, settings, run, api, cpu_trace, sent_tasks, django_capture_on_commit_callbacks
) -> None:
    raw = cpu_trace.read_bytes()
    with django_capture_on_commit_callbacks(execute=True):
        reply = post(api, run, "gpu_job.json", raw)
    assert reply.status_code == 201, reply.content
    body = reply.json()
    assert (body["name"], body["source"], body["format"], body["status"]) == (
        "gpu_job.json.gz",
        "imported",
        "kineto",
        "pending",
    )
    assert body["raw_bytes"] == len(raw)
    # The summary is asked of the control worker once the import commits.
    assert [(t["task"], t["args"], t["queue"]) for t in sent_tasks] == [
        (SUMMARISE_PROFILE, [body["id"]], CONTROL_QUEUE)
    ]
    profile = Profile.objects.get()
    assert profile.uploaded_by.username == "owner"
    assert profile.artifact.kind == "trace"
    assert profile_store.keys() == [f"runs/{run.pk}/traces/gpu_job.json.gz"]

    # Stored compressed; the download is that file, which unpacks to the trace as sent.
    download = api.get(f"/api/v1/profiles/{profile.pk}/download/")
    assert download.status_code == 200
    stored = b"".join(download.streaming_content)
    assert len(stored) == profile.bytes < len(raw)
    assert gzip.decompress(stored) == raw

    done = do_summarise_profile(profile.pk)
    assert done.status == Profile.Status.READY, done.error
    assert done.summary["trace"]
    assert done.summary["steps"] is not None
    assert done.index["events"] > 0
    assert "path" not in done.index
    keys = profile_store.keys()
    assert stored_name(done.index_key) in keys
    detail = api.get(f"/api/v1/profiles/{profile.pk}/").json()
    assert detail["status"] == "ready"
    assert detail["summary"] == done.summary
    # A second message for the same profile finds nothing to do.
    assert do_summarise_profile(profile.pk) is None


def test_a_gzipped_trace_is_kept_byte_for_byte(profile_store, run, api, cpu_trace) -> None:
    packed = gz(cpu_trace.read_bytes())
    reply = post(api, run, "trace.json.gz", packed)
    assert reply.status_code == 201, reply.content
    artifact = Profile.objects.get().artifact
    assert artifact.bytes == len(packed)
    assert artifact.sha256 == hashlib.sha256(packed).hexdigest()


def test_an_ascend_pt_folder_is_imported_as_a_tar_and_summarised(
    profile_store, run, api, tmp_path
) -> None:
    folder = ascend_folder(tmp_path)
    data = tar_bytes(lambda archive: archive.add(folder, arcname=folder.name), compress=False)
    reply = post(api, run, "npu_run.tar", data)
    assert reply.status_code == 201, reply.content
    assert (reply.json()["format"], reply.json()["name"]) == ("ascend", "npu_run.tar.gz")
    done = do_summarise_profile(reply.json()["id"])
    assert done.status == Profile.Status.READY, done.error
    assert done.summary["trace"]


def test_importing_the_same_name_twice_keeps_both(profile_store, run, api, cpu_trace) -> None:
    raw = cpu_trace.read_bytes()
    assert post(api, run, "trace.json", raw).status_code == 201
    assert post(api, run, "trace.json", raw).status_code == 201
    names = sorted(Profile.objects.values_list("name", flat=True))
    assert names == ["trace-2.json.gz", "trace.json.gz"]
    assert Artifact.objects.filter(status=Artifact.Status.STORED).count() == 2


def test_a_trace_over_the_size_limit_is_refused_with_the_limit_and_nothing_is_kept(
    profile_store, settings, run, api, cpu_trace
) -> None:
    raw = cpu_trace.read_bytes()
    settings.NPULAB = dict(settings.NPULAB, PROFILE_MAX_BYTES=len(raw) - 1)
    reply = post(api, run, "big.json", raw)
    assert reply.status_code == 413
    body = reply.json()
    assert body["code"] == "payload_too_large"
    assert body["max_bytes"] == len(raw) - 1
    assert f"the limit of {len(raw) - 1} bytes (NPULAB_PROFILE_MAX_BYTES)" in body["detail"]
    nothing_kept(profile_store, settings)


def test_a_trace_that_unpacks_past_the_limit_is_refused_and_nothing_is_kept(
    profile_store, settings, run, api
) -> None:
    # A gzip bomb: 20 MB of zeros in about 20 kB.
    bomb = gz(b"[" + b" " * (20 << 20) + b"]")
    settings.NPULAB = dict(settings.NPULAB, PROFILE_MAX_UNPACKED_BYTES=1 << 20)
    reply = post(api, run, "bomb.json.gz", bomb)
    assert reply.status_code == 413
    assert "NPULAB_PROFILE_MAX_UNPACKED_BYTES" in reply.json()["detail"]
    assert reply.json()["max_unpacked_bytes"] == 1 << 20
    nothing_kept(profile_store, settings)


def test_an_archive_that_unpacks_past_the_limit_is_refused(
    profile_store, settings, run, api
) -> None:
    settings.NPULAB = dict(settings.NPULAB, PROFILE_MAX_UNPACKED_BYTES=1 << 20)

    def add(archive: tarfile.TarFile) -> None:
        member(archive, "x_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json", b"[]")
        member(archive, "x_ascend_pt/FRAMEWORK/blob", b"\0" * (2 << 20))

    reply = post(api, run, "big.tar.gz", tar_bytes(add))
    assert reply.status_code == 413
    nothing_kept(profile_store, settings)


def link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> dict[str, Any]:
    return {"name": name, "type": kind, "linkname": target}


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ({"name": "/etc/cron.d/evil"}, "is an absolute path"),
        ({"name": "x_ascend_pt/../../evil"}, "climbs out with '..'"),
        (link("x_ascend_pt/passwd", "/etc/passwd"), "links outside the archive"),
        (link("x_ascend_pt/up", "../../.."), "links outside the archive"),
        (link("x_ascend_pt/hard", "../outside", tarfile.LNKTYPE), "links outside the archive"),
        ({"name": "x_ascend_pt/fifo", "type": tarfile.FIFOTYPE}, "neither a file nor a folder"),
        ({"name": "x_ascend_pt/dev", "type": tarfile.CHRTYPE}, "neither a file nor a folder"),
    ],
)
def test_an_unsafe_archive_is_refused_naming_the_entry_and_nothing_is_kept(
    profile_store, settings, run, api, entry, words
) -> None:
    def add(archive: tarfile.TarFile) -> None:
        member(archive, "x_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json", b"[]")
        fields = {key: value for key, value in entry.items() if key != "name"}
        member(archive, entry["name"], b"evil", **fields)

    reply = post(api, run, "profile.tar.gz", tar_bytes(add))
    assert reply.status_code == 400
    body = reply.json()
    assert body["code"] == "invalid"
    assert words in body["file"][0]
    assert "unsafe archive" in body["file"][0]
    nothing_kept(profile_store, settings)


def test_a_link_inside_the_archive_is_fine(profile_store, run, api) -> None:
    def add(archive: tarfile.TarFile) -> None:
        member(archive, "x_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json", b"[]")
        member(
            archive, "x_ascend_pt/latest", type=tarfile.SYMTYPE, linkname="ASCEND_PROFILER_OUTPUT"
        )

    assert post(api, run, "profile.tgz", tar_bytes(add)).status_code == 201


@pytest.mark.parametrize(
    ("name", "data", "words"),
    [
        ("trace.txt", b"{}", "is not a trace npulab reads"),
        ("trace.json.gz", b"{not gzip", "not a complete gzip file"),
        ("trace.json", b"hello", "not a Kineto/Chrome trace"),
        ("profile.tar.gz", b"\x1f\x8b\x08\x00broken", "not"),
        ("profile.tar.gz", None, "holds no *_ascend_pt folder"),
    ],
)
def test_a_file_that_is_no_trace_is_refused_by_field(
    profile_store, settings, run, api, name, data, words
) -> None:
    if data is None:
        data = tar_bytes(lambda archive: member(archive, "notes/readme.txt", b"hi"))
    reply = post(api, run, name, data)
    assert reply.status_code == 400
    assert words in reply.json()["file"][0]
    nothing_kept(profile_store, settings)


def test_only_the_runs_submitter_or_staff_may_import(
    profile_store, settings, run, other_api, cpu_trace
) -> None:
    reply = post(other_api, run, "trace.json", cpu_trace.read_bytes())
    assert reply.status_code == 403
    nothing_kept(profile_store, settings)


def test_a_runs_profiles_are_listed_and_a_missing_run_is_404(
    profile_store, run, api, cpu_trace
) -> None:
    post(api, run, "trace.json", cpu_trace.read_bytes())
    listed = api.get(f"/api/v1/runs/{run.pk}/profiles/").json()
    assert listed["count"] == 1
    assert "summary" not in listed["results"][0]
    assert api.get(f"/api/v1/runs/{run.pk}/profiles/?status=ready").json()["count"] == 0
    assert api.get("/api/v1/runs/999999/profiles/").status_code == 404
    assert api.get("/api/v1/profiles/999999/").status_code == 404


def test_the_run_pages_form_imports_and_the_panel_shows_it(
    profile_store, settings, client, owner, run, cpu_trace
) -> None:
    client.force_login(owner)
    page = client.get(run.get_absolute_url())
    assert b'id="profile-import"' in page.content
    upload = SimpleUploadedFile("from_gpu.json", cpu_trace.read_bytes())
    reply = client.post(f"/profiles/runs/{run.pk}/import/", {"file": upload}, follow=True)
    assert reply.status_code == 200
    assert b"Imported from_gpu.json.gz" in reply.content
    profile = Profile.objects.get()
    assert f'data-profile="{profile.pk}"'.encode() in reply.content
    do_summarise_profile(profile.pk)
    panel = client.get(f"/profiles/runs/{run.pk}/")
    assert b'data-status="ready"' in panel.content
    assert f"/profiles/{profile.pk}/timeline/".encode() in panel.content
    # Finished: the card no longer polls.
    assert b"hx-trigger" not in panel.content


def test_the_form_says_why_a_trace_was_refused(profile_store, settings, client, owner, run) -> None:
    client.force_login(owner)
    settings.NPULAB = dict(settings.NPULAB, PROFILE_MAX_BYTES=100)
    upload = SimpleUploadedFile("big.json", b"[" + b" " * 200 + b"]")
    reply = client.post(f"/profiles/runs/{run.pk}/import/", {"file": upload}, follow=True)
    assert b"The trace was not imported" in reply.content
    assert b"NPULAB_PROFILE_MAX_BYTES" in reply.content
    nothing_kept(profile_store, settings)


def test_an_upload_larger_than_it_may_be_is_stopped_while_it_is_read(
    profile_store, settings, run, api
) -> None:
    settings.NPULAB = dict(settings.NPULAB, PROFILE_MAX_BYTES=100 * 1024)
    data = b"[" + b" " * (300 * 1024) + b"]"
    # Said at once when the request says how large it is ...
    reply = post(api, run, "big.json", data)
    assert reply.status_code == 413
    assert reply.json()["max_bytes"] == 100 * 1024
    nothing_kept(profile_store, settings)
    # ... and while it is read when it is within what the request's other parts could take.
    reply = post(api, run, "big.json", data[: 110 * 1024])
    assert reply.status_code == 413
    assert (
        "larger than the limit of 102400 bytes (NPULAB_PROFILE_MAX_BYTES)" in reply.json()["detail"]
    )
    nothing_kept(profile_store, settings)
