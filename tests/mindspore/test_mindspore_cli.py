"""MindSpore training runs executed by hand (`python -m workers.run`) in a real MindSpore."""

from __future__ import annotations

import sys
import tarfile
from pathlib import Path

from tests.mindspore.interpreter import SCRIPT
from tests.workers.test_run_cli import by_type, run

LOSS_LINE = "epoch: 1 step: 8, loss is "


def training(**fields) -> dict:
    return {
        "kind": "training",
        "device_type": "cpu",
        "framework": "mindspore",
        "entry": str(SCRIPT),
        "args": ["2"],
        "timeout_s": 600,
        **fields,
    }


def log_lines(events: list[dict]) -> list[str]:
    return [event["line"] for event in by_type(events, "log")]


def test_graph_mode_with_o2_dumps_bounded_graphs_and_keeps_its_ckpt_files(
    tmp_path: Path, ms_python: str
) -> None:
    spec = training(
        mode="graph",
        amp_level="O2",
        loss_scale_manager="none",
        save_graphs=1,
        save_graphs_max_mb=1,
        checkpoint_dir="ckpt",
    )
    code, stderr, events = run(spec, tmp_path / "r", python=ms_python)
    assert code == 0, stderr
    lines = log_lines(events)
    assert any("mode graph, device_target CPU, amp_level O2" in line for line in lines)
    # The script's Model got the spec's amp_level without naming one.
    assert "amp_level O2" in lines
    assert any(line.startswith(LOSS_LINE) for line in lines)
    summary = events[-1]["summary"]
    # Level 1 writes ~15 MB: a 1 MB bound keeps a part and says so.
    assert summary["graph_files"] > summary["graph_files_kept"] > 0
    assert summary["graph_bytes_kept"] <= 1 << 20
    assert any("dropped beyond the bound of 1.0 MB" in line for line in lines)
    (artifact,) = by_type(events, "artifact")
    with tarfile.open(artifact["path"]) as tar:
        names = tar.getnames()
    assert len(names) == summary["graph_files_kept"]
    assert any(name.endswith(".ir") for name in names)
    # workers.track from the MindSpore script.
    metrics = {(m["key"], m["step"], m["value"]) for m in by_type(events, "metric")}
    assert ("epochs_trained", 16, 2.0) in metrics
    # ModelCheckpoint's two files, adopted as the run's checkpoints in the order written.
    checkpoints = by_type(events, "checkpoint")
    assert [c["step"] for c in checkpoints] == [1, 2]
    assert all(c["bytes"] > 0 for c in checkpoints)


def test_pynative_mode_trains(tmp_path: Path, ms_python: str) -> None:
    code, stderr, events = run(training(mode="pynative"), tmp_path / "r", ms_python)
    assert code == 0, stderr
    lines = log_lines(events)
    assert any("mode pynative" in line for line in lines)
    assert any(line.startswith(LOSS_LINE) for line in lines)
    assert "graph_files" not in events[-1]["summary"]
    assert not by_type(events, "artifact")


def test_a_graph_compile_error_names_the_failing_line(tmp_path: Path, ms_python: str) -> None:
    script = Path(__file__).with_name("bad_graph.py")
    spec = training(entry=str(script), args=[], mode="graph")
    code, _, events = run(spec, tmp_path / "r", ms_python)
    assert code == 1
    result = events[-1]
    assert result["cause"] == "job_error"
    assert result["reason"].startswith("graph compile error: RuntimeError: Unsupported expression")
    assert result["reason"].endswith(f"{script}:10: y = {{1, 2}}")
    # The diagnosis names it from MindSpore's own words (workers/diagnosis/rules/mindspore.json).
    (diagnosis,) = by_type(events, "diagnosis")
    found = diagnosis["diagnosis"]
    assert (found["rule"], found["category"], found["blame"]) == (
        "ms-graph-syntax",
        "graph-compile",
        "user-code",
    )
    assert found["line"].startswith("RuntimeError: Unsupported expression 'Set'.")


def test_an_interpreter_without_mindspore_says_so(tmp_path: Path) -> None:
    # The platform's own interpreter has torch, not MindSpore.
    code, _, events = run(training(), tmp_path / "r", python=sys.executable)
    assert code == 1
    result = events[-1]
    assert result["cause"] == "job_error"
    assert f"the run's interpreter {sys.executable} has no MindSpore" in result["reason"]


def test_the_mindspore_smoke_runs_run_check_and_trains(tmp_path: Path, ms_python: str) -> None:
    spec = {"kind": "smoke", "device_type": "cpu", "framework": "mindspore"}
    code, stderr, events = run(spec, tmp_path / "r", ms_python)
    assert code == 0, stderr
    steps = {step["name"]: step["status"] for step in by_type(events, "step")}
    assert steps == {"run_check": "pass", "train": "pass"}
    summary = events[-1]["summary"]
    assert summary["device_target"] == "CPU"
    assert summary["loss_last"] < summary["loss_first"]
    assert any("installed on platform [CPU] successfully" in line for line in log_lines(events))
