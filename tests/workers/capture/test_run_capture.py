"""Unmodified scripts run by hand (``python -m workers.run``): their metrics become events.

The scripts (tests/fixtures/scripts/) use the real clients: MLflow's by hand and through HF
Trainer's and Lightning's integrations, torch's SummaryWriter with TensorBoard's reader on
the supervisor's side, and print as HF's Trainer and PyTorch's word_language_model example
do.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.paths import REPO_DIR
from tests.workers.test_run_cli import by_type, run

SCRIPTS = REPO_DIR / "tests" / "fixtures" / "scripts"


def script_run(tmp_path: Path, script: str, **spec) -> list[dict]:
    document = {
        "kind": "training",
        "device_type": "cpu",
        "entry": str(SCRIPTS / script),
        "timeout_s": 600,
        **spec,
    }
    code, stderr, events = run(document, tmp_path / "run")
    assert code == 0, stderr
    return events


def series(events: list[dict], source: str) -> dict[str, list[tuple[int, float | None]]]:
    found: dict[str, list[tuple[int, float | None]]] = {}
    for event in by_type(events, "metric"):
        if event.get("source") == source:
            found.setdefault(event["key"], []).append((event["step"], event["value"]))
    return found


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_script_logging_with_mlflow_lands_in_the_run(tmp_path: Path, asynchronous: bool) -> None:
    env = {"MLFLOW_ENABLE_ASYNC_LOGGING": "true"} if asynchronous else {}
    events = script_run(tmp_path, "mlflow_by_hand.py", env=env)
    # Async logging sends batches from several threads: points come in any order.
    metrics = {key: sorted(points) for key, points in series(events, "mlflow").items()}
    assert metrics["loss"] == [(step, 1.0 / (step + 1)) for step in range(20)]
    assert metrics["accuracy"] == [(19, 0.9)]
    # NaN is kept as a gap, which one it was said.
    [nan] = [e for e in by_type(events, "metric") if e["key"] == "grad_norm"]
    assert (nan["value"], nan["nonfinite"]) == (None, "nan")
    # Each nested run keeps its points apart under its name.
    assert metrics["trial-0/loss"] == [(0, 0.0), (1, 1.0), (2, 2.0)]
    assert metrics["trial-1/loss"] == [(0, 1.0), (1, 2.0), (2, 3.0)]
    params = {e["key"]: e["value"] for e in by_type(events, "param")}
    assert params["lr"] == "0.1"
    assert params["batch_size"] == "32"
    assert params["trial-1/lr"] == "0.1"
    tags = by_type(events, "tag")
    assert any((t["key"], t["value"]) == ("team", "vision") for t in tags)
    assert any(t["key"] == "scratch" and t.get("deleted") for t in tags)
    # The script read its history back through the same API.
    lines = [e["line"] for e in by_type(events, "log")]
    assert "history points 20" in lines
    # Artifacts are named by their path in their MLflow run, a nested run's after its name,
    # as the platform's /mlflow/ names an outside client's.
    artifacts = {e["name"]: e for e in by_type(events, "artifact")}
    assert set(artifacts) == {
        "config.json",
        "notes/readme.txt",
        "trial-0/trial.txt",
        "trial-1/trial.txt",
    }
    assert {e["kind"] for e in artifacts.values()} == {"mlflow"}
    assert Path(artifacts["notes/readme.txt"]["path"]).read_text() == "hello"
    assert events[-1]["status"] == "succeeded"


def test_hf_trainer_reporting_to_mlflow_lands_in_the_run(tmp_path: Path) -> None:
    # Trainer's own MLflow callback resumes MLFLOW_RUN_ID: its keys stay as they are.
    # transformers is imported in the script's process only.
    events = script_run(tmp_path, "hf_trainer_mlflow.py", env={"HF_HUB_OFFLINE": "1"})
    # Trainer logs asynchronously: batches come from several threads, in any order.
    metrics = {key: sorted(points) for key, points in series(events, "mlflow").items()}
    assert [step for step, _ in metrics["loss"]] == [1, 2, 3, 4, 5]
    assert all(0 < value < 5 for _, value in metrics["loss"])
    # The linear schedule from 1e-3 to 0 over 5 steps, as Trainer logs it.
    assert metrics["learning_rate"] == [
        (step, pytest.approx(1e-3 * (6 - step) / 5)) for step in range(1, 6)
    ]
    assert [step for step, _ in metrics["grad_norm"]] == [1, 2, 3, 4, 5]
    [(step, _)] = metrics["train_loss"]
    assert step == 5
    # And as its progress bar prints them, each float a string of 4 digits: the same.
    printed = series(events, "stdout")
    assert [value for _, value in printed["loss"]] == [
        pytest.approx(value, rel=1e-3) for _, value in metrics["loss"]
    ]
    params = {e["key"]: e["value"] for e in by_type(events, "param") if e["source"] == "mlflow"}
    assert (params["learning_rate"], params["max_steps"]) == ("0.001", "5")
    assert (params["model_type"], params["hidden_size"]) == ("bert", "16")
    runner = [e["line"] for e in by_type(events, "log") if e["stream"] == "runner"]
    assert not [line for line in runner if "MLflow run" in line and "started" in line]
    assert events[-1]["status"] == "succeeded"


def test_lightnings_mlflow_logger_lands_in_the_run(tmp_path: Path) -> None:
    # MLFlowLogger makes a run of its own rather than resume MLFLOW_RUN_ID: the first one,
    # unnamed, is the run's own, so its keys stay as they are too.
    events = script_run(tmp_path, "lightning_mlflow.py")
    metrics = series(events, "mlflow")
    assert [step for step, _ in metrics["train_loss"]] == [0, 1, 2, 3, 4, 5]
    assert metrics["lr"][0] == (0, pytest.approx(0.05))
    params = {e["key"]: e["value"] for e in by_type(events, "param") if e["source"] == "mlflow"}
    assert params == {"lr": "0.05", "hidden": "4"}
    tags = {e["key"]: e["value"] for e in by_type(events, "tag")}
    assert tags["mlflow.source.name"].endswith("lightning_mlflow.py")
    runner = [e["line"] for e in by_type(events, "log") if e["stream"] == "runner"]
    assert any("is this run's own: its metrics keep their keys" in line for line in runner)
    assert any(line.endswith("is FINISHED") for line in runner)
    assert events[-1]["status"] == "succeeded"


def test_a_summary_writer_script_lands_in_the_run(tmp_path: Path) -> None:
    events = script_run(tmp_path, "summary_writer.py")
    metrics = series(events, "tensorboard")
    assert [step for step, _ in metrics["train/loss"]] == list(range(50))
    assert metrics["train/loss"][9] == (9, pytest.approx(0.2))
    assert metrics["train/lr"][0] == (0, pytest.approx(0.01))
    # The second writer's file, appearing after the first.
    assert metrics["eval/accuracy"] == [(49, 0.75)]
    assert metrics["train/loss_nan"] == [(50, None)]
    point = next(e for e in by_type(events, "metric") if e["key"] == "train/loss")
    assert point["time"] < events[-1]["time"]  # the event file's own wall time
    # The histogram is no metric of any source; the notice counts it by its tag (what
    # TensorBoard calls its kind differs between versions: "histo", "histograms").
    assert "weights" not in {e["key"] for e in by_type(events, "metric")}
    notices = [e["line"] for e in by_type(events, "log") if e["stream"] == "runner"]
    [other] = [line for line in notices if "not stored as metrics" in line]
    assert "x1 (weights)" in other, other


def test_hf_trainer_dicts_land_in_the_run_but_not_the_traceback(tmp_path: Path) -> None:
    events = script_run(tmp_path, "hf_trainer_dicts.py")
    metrics = series(events, "stdout")
    assert metrics["loss"] == [(step, round(1.0 / step, 4)) for step in range(1, 11)]
    assert metrics["learning_rate"][0] == (1, 5e-05)
    assert metrics["eval_loss"] == [(11, 0.42)]
    assert metrics["train_loss"] == [(12, 0.3)]
    assert all(value != 123 for values in metrics.values() for _, value in values)


def test_epoch_lines_land_in_the_run(tmp_path: Path) -> None:
    events = script_run(tmp_path, "epoch_lines.py")
    metrics = series(events, "stdout")
    assert [step for step, _ in metrics["loss"]] == [200, 400, 600, 3183, 3383, 3583]
    assert metrics["loss"][0][1] == pytest.approx(5.8)
    assert math.isclose(metrics["ppl"][0][1], 2.718**5.8, rel_tol=1e-3)
    assert metrics["valid_loss"] == [(600, 5.5), (3583, 5.5)]
    assert [value for _, value in metrics["epoch"]][-1] == 2.0


def test_stdout_metrics_false_turns_capture_off(tmp_path: Path) -> None:
    events = script_run(tmp_path, "epoch_lines.py", stdout_metrics=False)
    assert series(events, "stdout") == {}


def test_metric_patterns_replace_the_default(tmp_path: Path) -> None:
    events = script_run(
        tmp_path, "epoch_lines.py", metric_patterns=[r"(?P<step>\d+)/ 2983 .*ppl +(?P<ppl>[.\d]+)"]
    )
    metrics = series(events, "stdout")
    assert list(metrics) == ["ppl"]
    assert [step for step, _ in metrics["ppl"]] == [200, 400, 600, 800, 1000, 1200]
