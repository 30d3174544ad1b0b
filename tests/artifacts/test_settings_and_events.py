"""Choosing the storage from the environment, and the runner's ``artifact`` event."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

from tests.paths import REPO_DIR
from workers.events import EventWriter, iter_events


def storages_from(environ: dict[str, str]) -> subprocess.CompletedProcess:
    """npulab.settings loaded in a fresh interpreter with ``environ``; prints STORAGES."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("NPULAB_ARTIFACT", "NPULAB_S3_"))
    }
    env.update(environ, NPULAB_SECRET_KEY="tests-only", PYTHONPATH=str(REPO_DIR / "platform"))
    code = "import json, npulab.settings as s; print(json.dumps(s.STORAGES['artifacts']))"
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )


def test_the_artifacts_storage_is_a_local_directory_by_default() -> None:
    done = storages_from({})
    assert json.loads(done.stdout) == {"BACKEND": "npulab.artifacts.storage.LocalArtifactStorage"}


def test_an_s3_store_is_configured_from_the_environment() -> None:
    done = storages_from(
        {
            "NPULAB_ARTIFACT_STORAGE": "s3",
            "NPULAB_S3_BUCKET": "lab",
            "NPULAB_S3_ENDPOINT_URL": "http://minio:9000",
            "NPULAB_S3_REGION": "eu-west-1",
            "NPULAB_S3_ACCESS_KEY_ID": "id",
            "NPULAB_S3_SECRET_ACCESS_KEY": "secret",
        }
    )
    storage = json.loads(done.stdout)
    assert storage["BACKEND"] == "storages.backends.s3.S3Storage"
    options = storage["OPTIONS"]
    assert (options["bucket_name"], options["endpoint_url"], options["region_name"]) == (
        "lab",
        "http://minio:9000",
        "eu-west-1",
    )
    assert (options["access_key"], options["secret_key"]) == ("id", "secret")


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"NPULAB_ARTIFACT_STORAGE": "s3"}, "NPULAB_ARTIFACT_STORAGE=s3 needs NPULAB_S3_BUCKET"),
        ({"NPULAB_ARTIFACT_STORAGE": "ftp"}, "NPULAB_ARTIFACT_STORAGE must be local or s3"),
        ({"NPULAB_MAX_ARTIFACT_BYTES": "lots"}, "NPULAB_MAX_ARTIFACT_BYTES must be an integer"),
    ],
)
def test_a_bad_storage_setting_stops_the_start_naming_the_variable(environ, message) -> None:
    done = storages_from(environ)
    assert done.returncode != 0
    assert message in done.stderr


def test_the_artifact_event_gives_the_files_size_and_sha256(tmp_path) -> None:
    report = tmp_path / "report.html"
    report.write_bytes(b"<h1>ops</h1>" * 1000)
    writer = EventWriter(str(tmp_path / "events.jsonl"))
    writer.artifact("report.html", str(report), kind="report")
    writer.close()
    (event,) = iter_events(str(tmp_path / "events.jsonl"))
    assert {key: value for key, value in event.items() if key != "time"} == {
        "type": "artifact",
        "name": "report.html",
        "path": str(report),
        "bytes": 12000,
        "sha256": hashlib.sha256(report.read_bytes()).hexdigest(),
        "kind": "report",
    }
