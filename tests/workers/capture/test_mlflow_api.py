"""The supervisor's MLflow API against MLflow's own client: limits, errors and bad input."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import mlflow
import numpy as np
import pytest
import requests
from mlflow import MlflowClient
from mlflow.entities import LoggedModelStatus, Metric, Param, RunTag
from mlflow.exceptions import MlflowException
from mlflow.models import Model

from workers.capture.mlflow import EventsStore, MlflowServer
from workers.events import EventWriter, iter_events


class Served:
    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "events.jsonl"
        self.writer = EventWriter(str(self.path))
        self.store = EventsStore(self.writer, str(tmp_path), "npulab", "npulab-1")
        self.server = MlflowServer(self.store)
        self.server.start()
        self.client = MlflowClient(tracking_uri=self.server.url)
        self.session = requests.Session()

    def events(self) -> list[dict]:
        self.writer.flush()
        return list(iter_events(str(self.path)))

    def raw(self, method: str, path: str, body: object = None) -> tuple[int, dict]:
        response = self.session.request(method, self.server.url + path, json=body, timeout=30)
        return response.status_code, response.json()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    found = Served(tmp_path)
    yield found
    found.server.stop()
    found.writer.close()


def error_code(excinfo: pytest.ExceptionInfo) -> str:
    return excinfo.value.error_code


def test_an_unknown_run_id_gets_mlflows_error_shape(served: Served) -> None:
    with pytest.raises(MlflowException) as excinfo:
        served.client.log_metric("no-such-run", "loss", 1.0)
    assert error_code(excinfo) == "RESOURCE_DOES_NOT_EXIST"
    status, body = served.raw("GET", "/api/2.0/mlflow/runs/get?run_id=nope")
    assert status == 404
    assert body == {
        "error_code": "RESOURCE_DOES_NOT_EXIST",
        "message": "Run with id=nope not found",
    }


def test_an_endpoint_not_served_answers_at_once(served: Served) -> None:
    status, body = served.raw("POST", "/api/2.0/mlflow/registered-models/create", {"name": "m"})
    assert (status, body["error_code"]) == (404, "ENDPOINT_NOT_FOUND")
    status, body = served.raw("GET", "/anything")
    assert (status, body["error_code"]) == (404, "ENDPOINT_NOT_FOUND")


def test_batch_limits_are_mlflows(served: Served) -> None:
    run_id = served.store.run_id
    metrics = [Metric("m", float(n), 0, n) for n in range(1001)]
    with pytest.raises(MlflowException) as excinfo:
        # The client splits batches itself; the server's own limit is checked by hand below.
        served.client._tracking_client.store.log_batch(run_id, metrics, [], [])
    assert error_code(excinfo) == "INVALID_PARAMETER_VALUE"
    assert "at most 1000 metrics" in str(excinfo.value)
    params = [{"key": f"p{n}", "value": "v"} for n in range(101)]
    status, body = served.raw(
        "POST", "/api/2.0/mlflow/runs/log-batch", {"run_id": run_id, "params": params}
    )
    assert (status, body["error_code"]) == (400, "INVALID_PARAMETER_VALUE")
    assert "at most 100 params" in body["message"]
    tags = [{"key": f"t{n}", "value": "v"} for n in range(101)]
    status, body = served.raw(
        "POST", "/api/2.0/mlflow/runs/log-batch", {"run_id": run_id, "tags": tags}
    )
    assert "at most 100 tags" in body["message"]
    # The client's own batching goes through: nothing is lost.
    served.client.log_batch(run_id, metrics=metrics)
    assert len([e for e in served.events() if e["type"] == "metric"]) == 1001


def test_param_and_tag_value_limits(served: Served) -> None:
    run_id = served.store.run_id
    served.client.log_param(run_id, "ok", "x" * 6000)
    served.client.set_tag(run_id, "ok", "y" * 8000)
    with pytest.raises(MlflowException) as excinfo:
        served.client.log_batch(run_id, params=[Param("long", "x" * 6001)])
    assert error_code(excinfo) == "INVALID_PARAMETER_VALUE"
    with pytest.raises(MlflowException):
        served.client.log_batch(run_id, tags=[RunTag("long", "y" * 8001)])
    with pytest.raises(MlflowException) as excinfo:
        served.client.log_param(run_id, "ok", "changed")
    assert "Changing param values is not allowed" in str(excinfo.value)


def test_a_ten_thousand_character_metric_name_is_refused_not_fatal(served: Served) -> None:
    with pytest.raises(MlflowException) as excinfo:
        served.client.log_metric(served.store.run_id, "k" * 10_000, 1.0)
    assert error_code(excinfo) == "INVALID_PARAMETER_VALUE"
    served.client.log_metric(served.store.run_id, "loss", 1.0)
    assert [e["key"] for e in served.events() if e["type"] == "metric"] == ["loss"]


def test_a_million_distinct_keys_are_bounded_with_a_notice(served: Served) -> None:
    run_id = served.store.run_id
    # 100,000 through the API in batches the client would send (each request costs the
    # same past the bound), then a million more keys straight to the store.
    for start in range(0, 100_000, 1000):
        metrics = [
            {"key": f"k{n}", "value": 1.0, "step": 0, "timestamp": 0}
            for n in range(start, start + 1000)
        ]
        status, _ = served.raw(
            "POST", "/api/2.0/mlflow/runs/log-batch", {"run_id": run_id, "metrics": metrics}
        )
        assert status == 200
    for start in range(100_000, 1_100_000, 1000):
        batch = [(f"k{n}", 1.0, 0, 0) for n in range(start, start + 1000)]
        served.store.log(run_id, batch, [], [])
    events = served.events()
    keys = {e["key"] for e in events if e["type"] == "metric"}
    assert len(keys) == 10_000
    notices = [e["line"] for e in events if e["type"] == "log" and "distinct" in e["line"]]
    assert len(notices) == 1
    served.client.log_metric(run_id, "k5", 2.0, step=1)  # a kept key still takes points
    assert len(served.client.get_metric_history(run_id, "k5")) == 2


def test_a_hundred_threads_logging_at_once_lose_nothing(served: Served) -> None:
    run_id = served.store.run_id

    def log(thread: int) -> None:
        client = MlflowClient(tracking_uri=served.server.url)
        for step in range(20):
            client.log_metric(run_id, f"thread{thread}", float(step), step=step)

    threads = [threading.Thread(target=log, args=(n,)) for n in range(100)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    points = [e for e in served.events() if e["type"] == "metric"]
    assert len(points) == 2000
    assert len(served.client.get_metric_history(run_id, "thread7")) == 20


def test_nested_and_repeated_run_names_keep_apart(served: Served) -> None:
    experiment = served.store.experiment_id
    first = served.client.create_run(experiment, run_name="trial")
    second = served.client.create_run(experiment, run_name="trial")
    served.client.log_metric(first.info.run_id, "loss", 1.0)
    served.client.log_metric(second.info.run_id, "loss", 2.0)
    served.client.set_terminated(first.info.run_id)
    keys = {e["key"]: e["value"] for e in served.events() if e["type"] == "metric"}
    assert keys == {"trial/loss": 1.0, "trial-2/loss": 2.0}
    assert served.client.get_run(first.info.run_id).info.status == "FINISHED"
    found = served.client.search_runs([experiment])
    assert {run.info.run_id for run in found} >= {first.info.run_id, second.info.run_id}


def test_a_first_unnamed_run_the_script_makes_is_the_runs_own(served: Served) -> None:
    # As Lightning's MLFlowLogger does: an experiment of its own, a run made, not resumed.
    experiment = served.client.create_experiment("lightning_logs")
    made = served.client.create_run(experiment, tags={"mlflow.source.name": "train.py"})
    assert made.info.run_id == served.store.run_id
    assert made.info.experiment_id == experiment
    # Once the run's own is taken, another unnamed run keeps apart, as a named one does.
    other = served.client.create_run(experiment)
    named = served.client.create_run(experiment, run_name="trial")
    for run_id, value in ((made.info.run_id, 1.0), (other.info.run_id, 2.0)):
        served.client.log_metric(run_id, "loss", value)
    served.client.log_metric(named.info.run_id, "loss", 3.0)
    keys = {e["key"]: e["value"] for e in served.events() if e["type"] == "metric"}
    assert keys == {"loss": 1.0, f"{other.info.run_id[:8]}/loss": 2.0, "trial/loss": 3.0}
    tags = {e["key"]: e["value"] for e in served.events() if e["type"] == "tag"}
    assert tags["mlflow.source.name"] == "train.py"
    lines = [e["line"] for e in served.events() if e["type"] == "log"]
    assert any("is this run's own: its metrics keep their keys" in line for line in lines)


def test_a_run_made_after_the_script_used_the_runs_own_keeps_apart(served: Served) -> None:
    served.client.log_metric(served.store.run_id, "loss", 1.0)
    made = served.client.create_run(served.store.experiment_id)
    assert made.info.run_id != served.store.run_id
    served.client.log_metric(made.info.run_id, "loss", 2.0)
    keys = {e["key"]: e["value"] for e in served.events() if e["type"] == "metric"}
    assert keys == {"loss": 1.0, f"{made.info.run_id[:8]}/loss": 2.0}


def test_artifacts_go_through_the_mlflow_artifacts_api_too(served: Served, tmp_path: Path) -> None:
    from mlflow.store.artifact.mlflow_artifacts_repo import MlflowArtifactsRepository

    run = served.client.create_run(served.store.experiment_id, run_name="trial")
    uri = f"mlflow-artifacts:/{served.store.experiment_id}/{run.info.run_id}/artifacts"
    repo = MlflowArtifactsRepository(uri, tracking_uri=served.server.url)
    local = tmp_path / "model 1.txt"
    local.write_text("weights")
    repo.log_artifact(str(local), "model")
    assert [(f.path, f.is_dir) for f in repo.list_artifacts()] == [("model", True)]
    listed = [(f.path, f.file_size) for f in repo.list_artifacts("model")]
    assert listed == [("model/model 1.txt", 7)]
    (tmp_path / "back").mkdir()
    fetched = repo.download_artifacts("model/model 1.txt", str(tmp_path / "back"))
    assert Path(fetched).read_text() == "weights"
    # A hostile path is refused before anything is written.
    for hostile in ("../../escape.txt", "a/%2e%2e/%2e%2e/%2e%2e/escape.txt", "nul%00.txt"):
        # Sent as written: requests would resolve the dots before they leave.
        connection = http.client.HTTPConnection(*served.server.httpd.server_address[:2])
        connection.request("PUT", f"/api/2.0/mlflow-artifacts/artifacts/{hostile}", body=b"x")
        response = connection.getresponse()
        assert response.status == 400
        assert json.loads(response.read())["error_code"] == "INVALID_PARAMETER_VALUE"
        connection.close()
    assert not list(tmp_path.rglob("escape.txt"))
    served.store.send_artifacts()
    [artifact] = [e for e in served.events() if e["type"] == "artifact"]
    assert (artifact["name"], artifact["kind"], artifact["bytes"]) == (
        "trial/model/model 1.txt",
        "mlflow",
        7,
    )


def test_a_runs_api_answers_only_the_script_that_holds_its_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another run on the host reaches 127.0.0.1 too: without this run's token it neither
    # reads nor writes its metrics.
    writer = EventWriter(str(tmp_path / "events.jsonl"))
    store = EventsStore(writer, str(tmp_path), "npulab", "npulab-1")
    server = MlflowServer(store, token="the-runs-own")
    server.start()
    try:
        url = server.url + f"/api/2.0/mlflow/runs/get?run_id={store.run_id}"
        for headers in ({}, {"Authorization": "Bearer another-runs"}, {"Authorization": "x"}):
            refused = requests.get(url, headers=headers, timeout=30)
            assert refused.status_code == 401
            assert refused.json()["error_code"] == "UNAUTHENTICATED"
        posted = requests.post(
            server.url + "/api/2.0/mlflow/runs/log-metric",
            json={"run_id": store.run_id, "key": "loss", "value": 9.0, "step": 0, "timestamp": 1},
            timeout=30,
        )
        assert posted.status_code == 401
        # MLflow's own client sends MLFLOW_TRACKING_TOKEN as a bearer token.
        monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "the-runs-own")
        MlflowClient(tracking_uri=server.url).log_metric(store.run_id, "loss", 1.5, step=3)
        writer.flush()
        metrics = [e for e in iter_events(str(tmp_path / "events.jsonl")) if e["type"] == "metric"]
        assert [(m["key"], m["value"], m["step"]) for m in metrics] == [("loss", 1.5, 3)]
    finally:
        server.stop()
        writer.close()


def exchange(served: Served, *requests_: bytes) -> bytes:
    """Send ``requests_`` on one connection, then read until the server closes it."""
    host, port = served.server.httpd.server_address[:2]
    with socket.create_connection((host, port), timeout=30) as connection:
        for request in requests_:
            connection.sendall(request)
        received = b""
        while block := connection.recv(65536):
            received += block
    return received


def log_metric_request(run_id: str, value: float, *headers: str, version: str = "1.1") -> bytes:
    body = json.dumps({"run_id": run_id, "key": "loss", "value": value, "step": 0}).encode()
    head = [f"POST /api/2.0/mlflow/runs/log-metric HTTP/{version}", *headers]
    head.append(f"content-LENGTH: {len(body)}")  # header names are case-insensitive
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def test_keep_alive_and_connection_close_are_http_11s(served: Served) -> None:
    run_id = served.store.run_id
    # Two requests on one connection, the second asking to close it: both answered, then
    # the server closes (exchange returns).
    received = exchange(
        served,
        log_metric_request(run_id, 1.0, "Host: x"),
        log_metric_request(run_id, 2.0, "Host: x", "Connection: close"),
    )
    assert received.count(b"HTTP/1.1 200 OK\r\n") == 2
    # HTTP/1.0 closes after its reply unless it asks to be kept alive.
    assert exchange(served, log_metric_request(run_id, 3.0, version="1.0")).startswith(
        b"HTTP/1.1 200"
    )
    values = [e["value"] for e in served.events() if e["type"] == "metric"]
    assert values == [1.0, 2.0, 3.0]


def test_a_bad_header_line_or_request_line_is_answered_and_closed(served: Served) -> None:
    no_colon = b"POST /api/2.0/mlflow/runs/log-metric HTTP/1.1\r\nno colon here\r\n\r\n"
    assert exchange(served, no_colon).startswith(b"HTTP/1.1 400 ")
    folded = b"GET /x HTTP/1.1\r\nHost: x\r\n continued\r\n\r\n"
    assert exchange(served, folded).startswith(b"HTTP/1.1 400 ")
    too_long = b"GET /x HTTP/1.1\r\nX-Long: " + b"a" * 70000 + b"\r\n\r\n"
    assert exchange(served, too_long).startswith(b"HTTP/1.1 431 ")
    too_many = b"GET /x HTTP/1.1\r\n" + b"X-Same: 1\r\n" * 101 + b"\r\n"
    assert exchange(served, too_many).startswith(b"HTTP/1.1 431 ")
    # Not HTTP/1.x: the standard library's own answers (its error page, as HTTP/0.9 has
    # no status line).
    assert b"Error code: 505" in exchange(served, b"GET /x HTTP/2.0\r\n\r\n")
    assert b"Error code: 400" in exchange(served, b"GARBAGE\r\n\r\n")
    assert [e for e in served.events() if e["type"] == "metric"] == []


def test_a_client_that_expects_100_continue_gets_it_before_it_sends_the_body(
    served: Served,
) -> None:
    request = log_metric_request(served.store.run_id, 4.0, "Expect: 100-continue")
    head, body = request.split(b"\r\n\r\n", 1)
    host, port = served.server.httpd.server_address[:2]
    with socket.create_connection((host, port), timeout=30) as connection:
        connection.sendall(head + b"\r\n\r\n")
        # The interim reply comes while the body is still held back (or the read times out).
        assert connection.recv(65536).startswith(b"HTTP/1.1 100 Continue\r\n")
        connection.sendall(body)
        assert connection.recv(65536).startswith(b"HTTP/1.1 200 OK\r\n")
    assert [e["value"] for e in served.events() if e["type"] == "metric"] == [4.0]


class Doubler(mlflow.pyfunc.PythonModel):
    def predict(self, context: object, model_input: list[int], params: object = None) -> list[int]:
        return [2 * x for x in model_input]


def log_doubler(name: str) -> mlflow.models.model.ModelInfo:
    # Its requirements given: MLflow would otherwise work them out in a process of its own.
    return mlflow.pyfunc.log_model(name=name, python_model=Doubler(), pip_requirements=["mlflow"])


def test_a_model_logged_as_mlflow_3_logs_it_is_kept_with_the_runs_artifacts(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mlflow.<flavour>.log_model: a logged model made, its files written to the location it
    # names, the run's output recorded, then the model finalized.
    monkeypatch.setenv("MLFLOW_TRACKING_URI", served.server.url)
    run_id = served.store.run_id
    with mlflow.start_run(run_id=run_id):
        first = log_doubler("model")
        second = log_doubler("model")
        by_run = mlflow.pyfunc.load_model(f"runs:/{run_id}/model")
    assert by_run.predict([1, 2]) == [2, 4]
    assert mlflow.pyfunc.load_model(second.model_uri).predict([3]) == [6]
    model = served.client.get_logged_model(first.model_id)
    assert model.status == LoggedModelStatus.READY
    assert model.source_run_id == run_id
    assert model.artifact_location.endswith(f"/{run_id}/artifacts/models/model")
    assert served.client.get_logged_model(second.model_id).artifact_location.endswith(
        "/artifacts/models/model-2"
    )
    found = served.client.search_logged_models(
        [served.store.experiment_id], filter_string="name = 'model-2'"
    )
    assert [m.model_id for m in found] == [second.model_id]
    # Its files are the run's artifacts, stored as the run ends.
    served.store.send_artifacts()
    events = served.events()
    names = {e["name"] for e in events if e["type"] == "artifact"}
    assert {"models/model/MLmodel", "models/model-2/MLmodel"} <= names
    logs = [e["line"] for e in events if e["type"] == "log"]
    assert f"MLflow model 'model' (id {first.model_id}): its files are models/model/" in logs
    assert f"MLflow model 'model-2' (id {second.model_id}) is LOGGED_MODEL_READY" in logs


def test_a_dataset_the_script_logs_is_a_tag_of_the_run(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", served.server.url)
    dataset = mlflow.data.from_numpy(np.zeros((3, 2)), name="mnist-sample")
    with mlflow.start_run(run_id=served.store.run_id):
        mlflow.log_input(dataset, context="training")
    [tag] = [e for e in served.events() if e["type"] == "tag"]
    assert tag["key"] == "dataset.mnist-sample"
    assert tag["value"] == f"digest {dataset.digest}, source code, context training"


def test_logged_models_refuse_what_mlflow_refuses(served: Served) -> None:
    run_id = served.store.run_id
    experiment = served.store.experiment_id
    models = "/api/2.0/mlflow/logged-models"
    status, body = served.raw("GET", f"{models}/m-nope")
    assert (status, body["error_code"]) == (404, "RESOURCE_DOES_NOT_EXIST")
    status, body = served.raw("POST", models, {"experiment_id": experiment, "source_run_id": "x"})
    assert (status, body["message"]) == (404, "Run with id=x not found")
    status, body = served.raw("POST", models, {"source_run_id": run_id})
    assert status == 400
    assert body["message"] == "Missing value for required parameter 'experiment_id'."
    # A name is a folder of the run's artifacts: never a way out of them.
    status, body = served.raw("POST", models, {"experiment_id": experiment, "name": "../../etc"})
    assert (status, body["error_code"]) == (400, "INVALID_PARAMETER_VALUE")
    status, body = served.raw("POST", models, {"experiment_id": experiment, "name": "a/b"})
    assert status == 200
    model_id = body["model"]["info"]["model_id"]
    assert body["model"]["info"]["artifact_uri"].endswith("/artifacts/models/a-b")
    status, body = served.raw("PATCH", f"{models}/{model_id}", {"status": "DONE"})
    assert (status, body["message"]) == (400, "Invalid value 'DONE' for parameter 'status'.")
    status, body = served.raw(
        "POST", f"{models}/search", {"experiment_ids": [experiment], "filter": "metrics.acc > 0.9"}
    )
    assert status == 400
    assert body["message"].startswith("Unsupported filter 'metrics.acc > 0.9'")
    hostile = "name = 'a' AND" + " " * 100_000 + "x"
    status, body = served.raw(
        "POST", f"{models}/search", {"experiment_ids": [experiment], "filter": hostile}
    )
    assert status == 400
    assert body["message"].startswith("Unsupported filter 'x'")
    status, body = served.raw(
        "POST", f"{models}/search", {"experiment_ids": [experiment], "filter": "x" * 5000}
    )
    assert len(body["message"]) < 300
    status, body = served.raw("DELETE", f"{models}/{model_id}")
    assert (status, body["error_code"]) == (404, "ENDPOINT_NOT_FOUND")
    status, body = served.raw(
        "POST", "/api/2.0/mlflow/runs/outputs", {"run_id": run_id, "models": [{"model_id": "m"}]}
    )
    assert (status, body["error_code"]) == (404, "RESOURCE_DOES_NOT_EXIST")
    status, body = served.raw(
        "POST", "/api/2.0/mlflow/runs/log-inputs", {"run_id": run_id, "datasets": [{"x": 1}]}
    )
    assert (status, body["message"]) == (400, "A dataset input must hold a 'dataset'.")
    # Tags and params, as the client sets them; the model answers with them.
    served.client.set_logged_model_tags(model_id, {"stage": "candidate", "gone": "x"})
    served.client.delete_logged_model_tag(model_id, "gone")
    served.client.log_model_params(model_id, {"lr": "0.1"})
    model = served.client.get_logged_model(model_id)
    assert (model.tags, model.params) == ({"stage": "candidate"}, {"lr": "0.1"})


def test_experiment_tags_are_kept_for_the_script_to_read_back(served: Served) -> None:
    experiment = served.store.experiment_id
    served.client.set_experiment_tag(experiment, "team", "vision")
    served.client.set_experiment_tag(experiment, "gone", "x")
    served.client.delete_experiment_tag(experiment, "gone")
    assert served.client.get_experiment(experiment).tags == {"team": "vision"}
    made = served.client.create_experiment("sweep", tags={"kind": "hpo"})
    assert served.client.get_experiment_by_name("sweep").tags == {"kind": "hpo"}
    assert made != experiment
    status, body = served.raw(
        "POST",
        "/api/2.0/mlflow/experiments/set-experiment-tag",
        {"experiment_id": "404", "key": "k", "value": "v"},
    )
    assert (status, body["error_code"]) == (404, "RESOURCE_DOES_NOT_EXIST")


def test_a_model_logged_as_mlflow_2_logs_it_is_in_the_runs_history_tag(served: Served) -> None:
    run_id = served.store.run_id
    model = Model(artifact_path="model", run_id=run_id, flavors={"python_function": {}})
    served.client._tracking_client.store.record_logged_model(run_id, model)

    def history() -> list[str]:
        tags = served.client.get_run(run_id).data.tags
        return [entry["artifact_path"] for entry in json.loads(tags["mlflow.log-model.history"])]

    assert history() == ["model"]
    # Too large for the tag beside the first: the newest is kept.
    big = json.dumps({"artifact_path": "big", "note": "x" * 7900})
    status, _ = served.raw(
        "POST", "/api/2.0/mlflow/runs/log-model", {"run_id": run_id, "model_json": big}
    )
    assert status == 200
    assert history() == ["big"]
    status, body = served.raw(
        "POST", "/api/2.0/mlflow/runs/log-model", {"run_id": run_id, "model_json": "[1]"}
    )
    assert (status, body["message"]) == (400, "model_json must be an object.")
    huge = json.dumps({"note": "x" * 9000})
    status, body = served.raw(
        "POST", "/api/2.0/mlflow/runs/log-model", {"run_id": run_id, "model_json": huge}
    )
    assert status == 400
    assert "over the 8000 characters" in body["message"]
    assert history() == ["big"]
