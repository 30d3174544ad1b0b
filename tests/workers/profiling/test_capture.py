"""A profiling window by hand, with no platform: ``python -m workers.run`` with a ``profile``
key, and ``run.profile_step()`` of workers.track, leave real torch.profiler traces."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.paths import REPO_DIR as REPO
from tests.workers.test_run_cli import by_type, run
from workers.contract.events import TRACE
from workers.contract.kinds import validate
from workers.contract.spec import PROFILE_DEFAULTS, SpecError, clean_profile
from workers.events import iter_events

SMOKE = {"kind": "smoke", "device_type": "cpu", "matmul_size": 64, "train_steps": 8}


def chrome_trace(path: Path) -> dict:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def profiler_steps(trace: dict) -> list[str]:
    """The ProfilerStep#N slices torch.profiler wrote for each recorded step."""
    return sorted(
        {
            event["name"]
            for event in trace["traceEvents"]
            if str(event.get("name", "")).startswith("ProfilerStep#")
        }
    )


def test_a_smoke_run_with_a_profile_leaves_a_gzipped_chrome_trace_and_its_event(
    tmp_path: Path,
) -> None:
    run_dir = tmp_path / "run"
    spec = dict(SMOKE, profile={"wait": 1, "warmup": 1, "active": 2, "record_shapes": True})
    code, stderr, events = run(spec, run_dir)
    assert code == 0, stderr
    traces = [event for event in by_type(events, "artifact") if event["kind"] == TRACE]
    assert [event["name"] for event in traces] == ["trace-1.json.gz"]
    event = traces[0]
    path = Path(event["path"])
    assert path == run_dir / "profiles" / "trace-1.json.gz"
    data = path.read_bytes()
    assert event["bytes"] == len(data)
    assert event["sha256"] == hashlib.sha256(data).hexdigest()
    trace = chrome_trace(path)
    # Steps 0 and 1 waited and warmed up; steps 2 and 3 were recorded, with shapes.
    assert profiler_steps(trace) == ["ProfilerStep#2", "ProfilerStep#3"]
    assert any(e.get("args", {}).get("Input Dims") for e in trace["traceEvents"])
    # Nothing raw is left beside the trace; the run still passed and says what it recorded.
    assert sorted(os.listdir(run_dir / "profiles")) == ["trace-1.json.gz"]
    assert by_type(events, "result")[-1]["status"] == "succeeded"
    lines = [e["line"] for e in by_type(events, "log") if e["stream"] == "runner"]
    assert any(line.startswith("profiling: trace trace-1.json.gz") for line in lines)


def test_each_repeat_of_the_window_is_a_trace_of_its_own(tmp_path: Path) -> None:
    spec = dict(SMOKE, train_steps=6, profile={"wait": 0, "warmup": 1, "active": 1, "repeat": 2})
    code, stderr, events = run(spec, tmp_path / "run")
    assert code == 0, stderr
    traces = [event for event in by_type(events, "artifact") if event["kind"] == TRACE]
    assert [event["name"] for event in traces] == ["trace-1.json.gz", "trace-2.json.gz"]
    steps = [profiler_steps(chrome_trace(Path(event["path"]))) for event in traces]
    assert steps == [["ProfilerStep#1"], ["ProfilerStep#3"]]


def test_a_loop_that_ends_before_the_active_steps_leaves_no_trace_and_says_so(
    tmp_path: Path,
) -> None:
    spec = dict(SMOKE, train_steps=2, profile={"wait": 1, "warmup": 2, "active": 3})
    code, stderr, events = run(spec, tmp_path / "run")
    assert code == 0, stderr
    assert not by_type(events, "artifact")
    lines = [e["line"] for e in by_type(events, "log") if e["stream"] == "runner"]
    assert any("before an active one: no trace" in line for line in lines)


def test_a_run_without_a_profile_records_nothing(tmp_path: Path) -> None:
    code, stderr, events = run(SMOKE, tmp_path / "run")
    assert code == 0, stderr
    assert not by_type(events, "artifact")
    assert not (tmp_path / "run" / "profiles").exists()


def test_a_bad_profile_is_refused_before_the_run_starts(tmp_path: Path) -> None:
    code, _, _ = run(dict(SMOKE, profile={"active": 0, "colour": "red"}), tmp_path / "run")
    assert code != 0
    with pytest.raises(SpecError) as refused:
        validate(dict(SMOKE, profile={"active": 0}))
    assert "profile" in refused.value.errors
    assert "active must be an integer from 1" in refused.value.errors["profile"]


def test_the_profile_field_fills_in_torch_profilers_defaults() -> None:
    assert clean_profile(None) is None
    assert clean_profile({}) == PROFILE_DEFAULTS
    assert clean_profile({"active": 5, "level": "Level2"})["active"] == 5
    for bad, words in (
        ([], "must be an object"),
        ({"wait": -1}, "wait must be an integer"),
        ({"repeat": True}, "repeat must be an integer"),
        ({"with_stack": "yes"}, "with_stack must be true or false"),
        ({"level": "Level9"}, "level must be one of"),
        ({"aic_metrics": "Everything"}, "aic_metrics must be one of"),
        ({"span": 3}, "unknown key(s) span"),
        ({"ranks": "some"}, 'ranks must be "all" or a list of global ranks'),
        ({"ranks": [-1]}, "ranks -1 is no global rank"),
    ):
        with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
            clean_profile(bad)
    # Both looping kinds take it, from the one definition.
    for kind in ({"kind": "smoke"}, {"kind": "training", "entry": "builtin:cnn"}):
        spec = validate({**kind, "device_type": "cpu", "profile": {"active": 2}})
        assert spec["profile"]["active"] == 2
        assert validate({**kind, "device_type": "cpu"})["profile"] is None


TRACKED_SCRIPT = textwrap.dedent(
    """
    import torch
    from workers import track

    run = track.init()
    model = torch.nn.Linear(8, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range({steps}):
        optimizer.zero_grad()
        loss = model(torch.randn(16, 8)).pow(2).mean()
        loss.backward()
        optimizer.step()
        run.log(step, loss=loss.item())
        run.profile_step()
    """
)


def tracked(tmp_path: Path, steps: int, profile: object, **env: str) -> list[dict]:
    script = tmp_path / "train.py"
    script.write_text(TRACKED_SCRIPT.format(steps=steps))
    run_dir = tmp_path / "run"
    environ = dict(
        os.environ,
        PYTHONPATH=str(REPO),
        NPULAB_RUN_DIR=str(run_dir),
        NPULAB_DEVICE_TYPE="cpu",
        NPULAB_PROFILE=json.dumps(profile),
        **env,
    )
    done = subprocess.run(
        [sys.executable, str(script)], env=environ, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    path = run_dir / "events.jsonl"
    return list(iter_events(str(path))) if path.exists() else []


def test_tracks_profile_step_records_the_window_of_a_users_loop(tmp_path: Path) -> None:
    events = tracked(tmp_path, 6, {"wait": 1, "warmup": 1, "active": 2})
    traces = [event for event in by_type(events, "artifact") if event["kind"] == TRACE]
    assert [event["name"] for event in traces] == ["trace-1.json.gz"]
    assert profiler_steps(chrome_trace(Path(traces[0]["path"]))) == [
        "ProfilerStep#2",
        "ProfilerStep#3",
    ]


def test_a_loop_that_exits_inside_the_window_keeps_what_was_recorded(tmp_path: Path) -> None:
    events = tracked(tmp_path, 3, {"wait": 0, "warmup": 1, "active": 5})
    traces = [event for event in by_type(events, "artifact") if event["kind"] == TRACE]
    assert len(traces) == 1
    # Steps 1 and 2 were recorded (the step the exit interrupted is open, and empty).
    recorded = profiler_steps(chrome_trace(Path(traces[0]["path"])))
    assert {"ProfilerStep#1", "ProfilerStep#2"} <= set(recorded)
    assert "ProfilerStep#0" not in recorded


def test_profile_step_does_nothing_without_a_profile_or_on_a_rank_left_out(
    tmp_path: Path,
) -> None:
    assert not by_type(tracked(tmp_path, 3, None), "artifact")
    other = tmp_path / "rank1"
    other.mkdir()
    window = {"wait": 0, "warmup": 0, "active": 2, "ranks": [0, 2]}
    assert not by_type(tracked(other, 3, window, RANK="1"), "artifact")


def test_every_rank_records_its_own_traces_named_for_it(tmp_path: Path) -> None:
    events = tracked(tmp_path, 4, {"wait": 0, "warmup": 1, "active": 2}, RANK="3")
    traces = [event for event in by_type(events, "artifact") if event["kind"] == TRACE]
    assert [event["name"] for event in traces] == ["rank3-trace-1.json.gz"]
    path = Path(traces[0]["path"])
    assert path == tmp_path / "run" / "profiles" / "rank3-trace-1.json.gz"
    assert profiler_steps(chrome_trace(path)) == ["ProfilerStep#1", "ProfilerStep#2"]
    # Its raw output was its own, and is gone.
    assert sorted(os.listdir(tmp_path / "run" / "profiles")) == ["rank3-trace-1.json.gz"]
