"""Artifacts through ``/mlflow/`` with MLflow's own client: the mlflow-artifacts API as
``mlflow server --serve-artifacts`` serves it, stored in the run's artifact store."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import mlflow
import pytest
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException
from requests import HTTPError

from npulab.artifacts.models import Artifact
from npulab.projects.models import default_project
from npulab.runs.models import Run
from tests.mlflow.test_tracking_api import tracking  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def store_dir(settings: Any, tmp_path: Path) -> Path:
    """A local artifact store of its own, without the 1 GiB free-space reserve."""
    root = tmp_path / "store"
    settings.NPULAB = dict(settings.NPULAB, ARTIFACT_DIR=str(root), ARTIFACT_FREE_RESERVE_BYTES=0)
    settings.STORAGES = dict(
        settings.STORAGES,
        artifacts={"BACKEND": "npulab.artifacts.storage.LocalArtifactStorage"},
    )
    return root


def raw_put(uri: str, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
    """A PUT whose path is sent exactly as written: ``requests`` would resolve ``..`` first."""
    import os

    url = urlsplit(uri)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    token = os.environ["MLFLOW_TRACKING_TOKEN"]
    connection.putrequest("PUT", url.path + path, skip_accept_encoding=True)
    connection.putheader("Authorization", f"Bearer {token}")
    connection.putheader("Content-Length", str(len(body)))
    connection.endheaders(body)
    reply = connection.getresponse()
    answer = json.loads(reply.read() or b"{}")
    connection.close()
    return reply.status, answer


def test_artifacts_logged_by_the_client_are_the_runs_artifacts(
    tracking: str,  # noqa: F811
    store_dir: Path,
    api: Any,
    tmp_path: Path,
) -> None:
    folder = tmp_path / "outputs"
    (folder / "plots").mkdir(parents=True)
    (folder / "plots" / "loss.svg").write_text("<svg/>")
    (folder / "weights.bin").write_bytes(bytes(range(256)) * 64)
    mlflow.set_experiment(default_project().slug)
    with mlflow.start_run(run_name="with-files") as started:
        assert started.info.artifact_uri == (
            f"mlflow-artifacts:/{default_project().pk}/{started.info.run_id}/artifacts"
        )
        mlflow.log_dict({"layers": 4}, "config.json")
        mlflow.log_text("hello", "notes/readme.txt")
        mlflow.log_artifacts(str(folder), "outputs")
        mlflow.log_artifact(str(folder / "weights.bin"))
    run = Run.objects.get(pk=int(started.info.run_id))
    stored = {
        a.name: a
        for a in Artifact.objects.filter(run=run, kind="mlflow", status=Artifact.Status.STORED)
    }
    assert set(stored) == {
        "config.json",
        "notes/readme.txt",
        "outputs/plots/loss.svg",
        "outputs/weights.bin",
        "weights.bin",
    }
    # Listed with the run's other artifacts, and downloadable there.
    listed = api.get(f"/api/v1/runs/{run.pk}/artifacts/", {"kind": "mlflow"}).json()
    assert listed["count"] == 5
    readme = stored["notes/readme.txt"]
    download = api.get(f"/api/v1/runs/{run.pk}/artifacts/{readme.pk}/download/")
    assert b"".join(download.streaming_content) == b"hello"
    # The client lists and downloads them back through the same API.
    client = MlflowClient()
    top = {(f.path, f.is_dir) for f in client.list_artifacts(started.info.run_id)}
    assert top == {
        ("config.json", False),
        ("notes", True),
        ("outputs", True),
        ("weights.bin", False),
    }
    below = client.list_artifacts(started.info.run_id, "outputs/plots")
    assert [(f.path, f.file_size) for f in below] == [("outputs/plots/loss.svg", 6)]
    assert mlflow.artifacts.load_dict(f"{started.info.artifact_uri}/config.json") == {"layers": 4}
    fetched = Path(client.download_artifacts(started.info.run_id, "outputs", str(tmp_path / "d")))
    assert (fetched / "weights.bin").read_bytes() == bytes(range(256)) * 64
    assert (fetched / "plots" / "loss.svg").read_text() == "<svg/>"
    # The same path again replaces the file, as MLflow's store does.
    client.log_text(started.info.run_id, "hello again", "notes/readme.txt")
    again = Artifact.objects.get(run=run, name="notes/readme.txt", status=Artifact.Status.STORED)
    assert again.bytes == len("hello again")
    # What the store's keys are made of is sanitised: the name keeps its folders only.
    assert all(
        ".." not in key and key.startswith(f"runs/{run.pk}/")
        for key in (a.storage_key for a in Artifact.objects.filter(status="stored"))
    )


@pytest.mark.parametrize(
    "hostile",
    [
        "../../../../etc/passwd",
        "%2e%2e/%2e%2e/%2e%2e/escape.txt",
        "/absolute.txt",
        "nul%00byte.txt",
        "back%5Cslash.txt",
        "a//b.txt",
        "x" * 300,
    ],
    ids=["dotdot", "encoded-dotdot", "absolute", "nul", "backslash", "empty-part", "too-long"],
)
def test_a_hostile_artifact_path_is_refused_in_mlflows_shape(
    tracking: str,  # noqa: F811
    store_dir: Path,
    hostile: str,
) -> None:
    run = MlflowClient().create_run("0", run_name="hostile").info
    root = f"/api/2.0/mlflow-artifacts/artifacts/{default_project().pk}/{run.run_id}/artifacts/"
    status, answer = raw_put(tracking, root + hostile, b"owned")
    assert status == 400, answer
    assert answer["error_code"] == "INVALID_PARAMETER_VALUE"
    assert "Invalid artifact path" in answer["message"]
    assert not Artifact.objects.exists()
    assert not [
        p for p in store_dir.parent.rglob("*") if p.is_file() and p.read_bytes() == b"owned"
    ]


def test_another_runs_artifacts_are_out_of_reach(
    tracking: str,  # noqa: F811
    store_dir: Path,
) -> None:
    run = MlflowClient().create_run("0", run_name="mine").info
    # Under another project's id, or a run that is not an MLflow client's.
    status, answer = raw_put(
        tracking, f"/api/2.0/mlflow-artifacts/artifacts/999/{run.run_id}/artifacts/a.txt", b"x"
    )
    assert (status, answer["error_code"]) == (404, "RESOURCE_DOES_NOT_EXIST")
    with pytest.raises(MlflowException) as raised:
        mlflow.artifacts.download_artifacts(
            f"mlflow-artifacts:/{default_project().pk}/{run.run_id}/artifacts/missing.txt"
        )
    assert "RESOURCE_DOES_NOT_EXIST" in str(raised.value)
    assert not Artifact.objects.exists()


def test_a_full_quota_answers_in_mlflows_shape_and_keeps_nothing(
    tracking: str,  # noqa: F811
    store_dir: Path,
    settings: Any,
    tmp_path: Path,
) -> None:
    settings.NPULAB = dict(settings.NPULAB, MAX_RUN_ARTIFACT_BYTES=1000)
    client = MlflowClient()
    run = client.create_run("0", run_name="quota").info
    small, big = tmp_path / "small.txt", tmp_path / "big.bin"
    small.write_bytes(b"s" * 600)
    big.write_bytes(b"b" * 600)
    client.log_artifact(run.run_id, str(small))
    with pytest.raises(HTTPError) as raised:
        client.log_artifact(run.run_id, str(big))
    answer = json.loads(str(raised.value).split("Response text: ", 1)[1])
    assert answer["error_code"] == "RESOURCE_EXHAUSTED"
    assert "NPULAB_MAX_RUN_ARTIFACT_BYTES" in answer["message"]
    assert raised.value.response.status_code == 507
    names = set(Artifact.objects.values_list("name", "status"))
    assert names == {("small.txt", "stored")}
    # The store's own size limit, too.
    settings.NPULAB = dict(settings.NPULAB, MAX_RUN_ARTIFACT_BYTES=10**9, MAX_ARTIFACT_BYTES=500)
    with pytest.raises(HTTPError) as raised:
        client.log_artifact(run.run_id, str(big))
    assert "NPULAB_MAX_ARTIFACT_BYTES" in str(raised.value)
    # And the run's tracking goes on.
    client.log_metric(run.run_id, "loss", 0.5)
    client.set_terminated(run.run_id)
    assert Run.objects.get(pk=int(run.run_id)).status == "succeeded"
