"""Unmodified scripts through the whole platform: their metrics reach the run's series.

The same scripts as tests/workers/capture (MLflow by hand, SummaryWriter, HF-style dicts,
``| epoch |`` lines), submitted as training runs and executed by the host worker; then an
outside MLflow client logging through ``/mlflow/`` with a token.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness.stack import Platform
from tests.paths import REPO_DIR
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e
SCRIPTS = REPO_DIR / "tests" / "fixtures" / "scripts"
# script -> (source, a key it gives, points of that key)
EXPECTED = {
    "mlflow_by_hand.py": ("mlflow", "loss", 20),
    "summary_writer.py": ("tensorboard", "train/loss", 50),
    "hf_trainer_dicts.py": ("stdout", "loss", 10),
    "epoch_lines.py": ("stdout", "ppl", 6),
}


@pytest.mark.parametrize("script", list(EXPECTED))
def test_a_script_submitted_as_a_training_run_gets_curves(platform: Platform, script: str) -> None:
    submitted = platform.submit(kind="training", entry=str(SCRIPTS / script), name=script)
    run = platform.wait(submitted["id"], timeout=600)
    assert run["status"] == "succeeded", platform.tail()
    source, key, points = EXPECTED[script]
    metrics = platform.api("GET", f"runs/{run['id']}/metrics/").json()["metrics"]
    listed = {(m["key"], m["source"]): m["points"] for m in metrics}
    assert listed[(key, source)] == points, listed
    if source == "mlflow":
        assert run["params"]["lr"] == "0.1"
        assert listed[("trial-1/loss", "mlflow")] == 3
        assert run["logged_tags"]["team"] == "vision"
        names = {
            event["data"]["name"]
            for event in platform.api(
                "GET", f"runs/{run['id']}/events/", params={"type": "artifact"}
            ).json()["results"]
        }
        assert {"config.json", "notes/readme.txt", "trial-1/trial.txt"} <= names, names
        # Stored by the host worker in the run's artifact store, named as /mlflow/ names them.

        def stored() -> set[str]:
            listed = platform.api("GET", f"runs/{run['id']}/artifacts/", params={"kind": "mlflow"})
            return {a["name"] for a in listed.json()["results"] if a["status"] == "stored"}

        wait_until(
            lambda: names <= stored(), timeout=120, what="the MLflow artifacts stored", poll_s=0.5
        )


def test_an_outside_mlflow_client_logs_through_the_platform(platform: Platform) -> None:
    token = platform.session.headers["Authorization"].split()[1]
    code = (
        "import mlflow\n"
        "with mlflow.start_run(run_name='ci-job') as run:\n"
        "    mlflow.log_param('commit', 'abc123')\n"
        "    for step in range(10):\n"
        "        mlflow.log_metric('loss', 1.0 / (step + 1), step=step)\n"
        "    mlflow.log_text('all green', 'ci/report.txt')\n"
        "print(run.info.run_id)\n"
    )
    # The job's own MLflow settings only: none another test's client left in this process.
    env = {name: value for name, value in os.environ.items() if not name.startswith("MLFLOW_")}
    env.update({"MLFLOW_TRACKING_URI": f"{platform.url}/mlflow", "MLFLOW_TRACKING_TOKEN": token})
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    run = platform.run(int(done.stdout.strip().splitlines()[-1]))
    assert (run["status"], run["host"], run["name"]) == ("succeeded", None, "ci-job")
    assert run["params"] == {"commit": "abc123"}
    loss = platform.api("GET", f"runs/{run['id']}/metrics/", params={"key": "loss"}).json()
    assert (loss["source"], loss["total"]) == ("mlflow", 10)
    [report] = platform.api("GET", f"runs/{run['id']}/artifacts/").json()["results"]
    assert (report["name"], report["kind"], report["status"]) == (
        "ci/report.txt",
        "mlflow",
        "stored",
    )
