"""``/mlflow/`` with MLflow's own client and an npulab token, as a notebook or a CI job uses it."""

from __future__ import annotations

from typing import Any

import mlflow
import numpy as np
import pytest
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from npulab.accounts.models import Scope
from npulab.accounts.services import do_issue_api_token
from npulab.projects.models import default_project
from npulab.runs.kinds import get as get_kind
from npulab.runs.models import Run
from npulab.runs.selectors import metric_keys

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def tracking(live_server: Any, owner: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    uri = f"{live_server.url}/mlflow"
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", do_issue_api_token(owner, name="notebook")[1])
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    for name in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID"):
        # Set, then deleted: undone whatever the client writes there meanwhile
        # (set_experiment exports MLFLOW_EXPERIMENT_ID to this process's environment).
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    mlflow.set_tracking_uri(uri)
    yield uri
    if mlflow.active_run() is not None:
        mlflow.end_run()


def test_an_outside_client_logs_a_run_of_its_own(tracking: str, api: Any) -> None:
    mlflow.set_experiment(default_project().slug)
    with mlflow.start_run(run_name="notebook") as started:
        mlflow.log_params({"lr": 0.01, "optimizer": "adam"})
        mlflow.set_tag("team", "nlp")
        for step in range(30):
            mlflow.log_metric("loss", 3.0 - step * 0.05, step=step)
        mlflow.log_metric("loss_nan", float("nan"), step=1)
        mlflow.log_metrics({"accuracy": 0.8, "f1": 0.7}, step=29)
        dataset = mlflow.data.from_numpy(np.zeros((3, 2)), name="holdout")
        mlflow.log_input(dataset, context="eval")
        # A logged model (MLflow 3's log_model) is a run's only where a run executes it.
        with pytest.raises(MlflowException) as excinfo:
            MlflowClient().create_logged_model(started.info.experiment_id, name="m")
        assert "logged models are kept by the runs npulab executes" in str(excinfo.value)
        with pytest.raises(MlflowException) as excinfo:
            mlflow.set_experiment_tag("team", "nlp")
        assert "an npulab project keeps none" in str(excinfo.value)
    run = Run.objects.get(pk=int(started.info.run_id))
    assert (run.status, run.host, run.name, run.tags) == ("succeeded", None, "notebook", ["mlflow"])
    assert run.project == default_project()
    detail = api.get(f"/api/v1/runs/{run.pk}/").json()
    assert detail["params"] == {"lr": "0.01", "optimizer": "adam"}
    assert detail["logged_tags"]["team"] == "nlp"
    assert detail["logged_tags"]["dataset.holdout"] == (
        f"digest {dataset.digest}, source code, context eval"
    )
    metrics = api.get(f"/api/v1/runs/{run.pk}/metrics/").json()["metrics"]
    assert {(m["key"], m["source"], m["points"]) for m in metrics} == {
        ("loss", "mlflow", 30),
        ("loss_nan", "mlflow", 1),
        ("accuracy", "mlflow", 1),
        ("f1", "mlflow", 1),
    }
    nan = api.get(f"/api/v1/runs/{run.pk}/metrics/", {"key": "loss_nan"}).json()
    assert nan["points"] == [[1, None]]
    assert "loss (mlflow)" in metric_keys(run)
    # The review's evidence: its loss, as for a tracked run.
    headlines = get_kind(run.kind).headlines(run)
    assert headlines["loss_first"].value == 3.0
    assert headlines["loss_last"].value == pytest.approx(3.0 - 29 * 0.05)
    # The client reads its history and its run back through the same API.
    client = MlflowClient()
    assert len(client.get_metric_history(started.info.run_id, "loss")) == 30
    fetched = client.get_run(started.info.run_id)
    assert fetched.data.params["optimizer"] == "adam"
    assert fetched.info.status == "FINISHED"


def test_errors_have_mlflows_shape(tracking: str) -> None:
    client = MlflowClient()
    with pytest.raises(MlflowException) as excinfo:
        client.log_metric("999999", "loss", 1.0)
    assert excinfo.value.error_code == "RESOURCE_DOES_NOT_EXIST"
    with pytest.raises(MlflowException) as excinfo:
        mlflow.set_experiment("no-such-project")
    assert excinfo.value.error_code == "INVALID_PARAMETER_VALUE"
    assert "npulab project" in str(excinfo.value)
    run = client.create_run("0", run_name="limits")
    with pytest.raises(MlflowException) as excinfo:
        client.log_param(run.info.run_id, "long", "x" * 6001)
    assert excinfo.value.error_code == "INVALID_PARAMETER_VALUE"


def test_a_token_is_required_and_its_scope_checked(
    tracking: str, owner: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_TOKEN")
    with pytest.raises(MlflowException) as excinfo:
        MlflowClient().create_run("0")
    assert "token is required" in str(excinfo.value)
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", do_issue_api_token(owner, scopes=[Scope.READ])[1])
    with pytest.raises(MlflowException) as excinfo:
        MlflowClient().create_run("0")
    assert "submit" in str(excinfo.value)
    assert not Run.objects.exists()


def test_a_viewer_may_not_log_into_a_project(
    tracking: str, other_user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from npulab.projects.models import Membership

    Membership.objects.filter(user=other_user).update(role=Membership.Role.VIEWER)
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", do_issue_api_token(other_user)[1])
    with pytest.raises(MlflowException) as excinfo:
        MlflowClient().create_run("0")
    assert "members and owners" in str(excinfo.value)
