"""The parity runner by hand: ``python -m workers.run`` on the CPU, msprobe dumping both sides."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.waiting import wait_until
from tests.workers.test_run_cli import by_type, run, start
from workers.contract.gang import NNODES, NODE_RANK
from workers.contract.script_env import HANDOFF_DIR
from workers.events import iter_events
from workers.kinds.parity import HANDOFF_FILE
from workers.kinds.parity.runner import share_no_device

pytest.importorskip("msprobe", reason="mindstudio-probe (the parity extra) is not installed")

SCRIPT = str(Path(__file__).with_name("model_script.py"))


def spec(mode: str = "ok", **fields: object) -> dict:
    return {
        "kind": "parity",
        "device_type": "cpu",
        "entry": SCRIPT,
        "args": [mode],
        "steps": 2,
        "timeout_s": 600,
        **fields,
    }


def result_of(events: list[dict]) -> dict:
    assert events[-1]["type"] == "result"
    return events[-1]


def test_two_equal_sides_on_the_cpu_run_at_once_and_pass_with_every_layer_identical(
    tmp_path: Path,
) -> None:
    # Each side waits for the other to start: one after the other, side a would give up.
    code, stderr, events = run(spec("meet"), tmp_path / "run")
    assert code == 0, stderr
    layers = by_type(events, "parity_layer")
    assert layers, stderr
    assert [layer["index"] for layer in layers] == list(range(len(layers)))
    names = [layer["name"] for layer in layers]
    # Forward and backward of each module, in execution order.
    assert "Functional.linear.1.forward.input.0" in names
    assert any("backward" in name for name in names)
    assert all(layer["broken"] == [] for layer in layers)
    assert all(layer["cosine"] is None or layer["cosine"] > 0.9999 for layer in layers)
    result = result_of(events)
    assert result["status"] == "succeeded"
    summary = result["summary"]
    assert summary["broken_layers"] == 0
    assert summary["first_divergent"] is None
    assert summary["loss"]["steps"] == 2
    assert summary["loss"]["max_rel_diff"] == 0
    assert summary["mode"] == "tensor"
    losses = {(m["key"], m["step"]) for m in by_type(events, "metric")}
    assert {("parity_loss/a", 1), ("parity_loss/b", 1)} <= losses


def test_noise_in_one_layer_names_it_first_divergent_with_the_scripts_call_site(
    tmp_path: Path,
) -> None:
    code, _, events = run(spec("noise"), tmp_path / "run")
    assert code == 1
    result = result_of(events)
    assert result["cause"] == "parity_diverged"
    first = result["summary"]["first_divergent"]
    # The second linear layer's weight (its input 1) is where side b differs.
    assert first["name"] == "Functional.linear.1.forward.input.1"
    assert first["cosine"] < 0.99
    # The stack is the script's own frames, innermost first: the line that called the layer.
    assert "model_script.py" in first["stack"][0]
    assert first["stack"][0].endswith("in forward: x = self.second(x)")
    assert "first divergent layer" in result["reason"]
    layers = by_type(events, "parity_layer")
    # Nothing before it broke: it is the first in execution order.
    position = next(i for i, layer in enumerate(layers) if layer["name"] == first["name"])
    before = layers[:position]
    assert all(not layer["broken"] for layer in before)
    assert result["summary"]["loss"]["first_step_past_tolerance"] == 0

    # The same dumps compared again, with no script run: the same first divergent layer.
    dumps = tmp_path / "run" / "parity"
    again = {
        "kind": "parity",
        "device_type": "cpu",
        "dump_a": str(dumps / "a" / "dump" / "step0"),
        "dump_b": str(dumps / "b" / "dump" / "step0"),
    }
    code, _, events = run(again, tmp_path / "again")
    assert code == 1
    result = result_of(events)
    assert result["cause"] == "parity_diverged"
    assert result["summary"]["first_divergent"]["name"] == first["name"]
    assert result["summary"]["mode"] == "tensor"
    assert not [e for e in by_type(events, "log") if "parity: side" in e["line"]]


@pytest.mark.parametrize(
    ("run_on", "a", "b", "at_once"),
    [
        ("cpu", "", "", True),
        ("npu", "cpu", "", True),
        ("npu", "", "cpu", True),
        ("npu", "", "", False),
        ("npu", "npu", "npu", False),
    ],
)
def test_sides_on_the_runs_accelerator_take_turns(
    run_on: str, a: str, b: str, at_once: bool
) -> None:
    declared = {"device_type": run_on, "a": {"device_type": a}, "b": {"device_type": b}}
    assert share_no_device(declared) is at_once


def test_a_side_on_a_device_the_run_does_not_lease_is_refused(tmp_path: Path) -> None:
    code, stderr, _ = run(spec(b={"device_type": "npu"}), tmp_path / "r")
    assert code == 2
    assert "a side runs on the run's device type (cpu) or the CPU" in stderr


def test_an_interpreter_without_msprobe_is_told_before_any_side_runs(tmp_path: Path) -> None:
    # The venv's base interpreter: the same Python, without the venv's packages.
    base = Path(sys.base_prefix) / "bin" / "python3"
    probe = subprocess.run([str(base), "-c", "import msprobe"], capture_output=True, check=False)
    if probe.returncode == 0:
        pytest.skip(f"{base} has msprobe")
    code, _, events = run(spec(), tmp_path / "run", python=str(base))
    assert code == 1
    result = result_of(events)
    assert result["cause"] == "parity_not_comparable"
    assert result["reason"].startswith("msprobe is not installed in the run's interpreter")
    assert not [e for e in by_type(events, "log") if "parity: side" in e.get("line", "")]


def test_dumps_must_come_in_pairs_and_exist(tmp_path: Path) -> None:
    code, stderr, _ = run({"kind": "parity", "device_type": "cpu", "dump_a": "/x"}, tmp_path / "r")
    assert code == 2
    assert "dump_b" in stderr
    code, _, events = run(
        {"kind": "parity", "device_type": "cpu", "dump_a": "/nowhere/a", "dump_b": "/nowhere/b"},
        tmp_path / "s",
    )
    assert code == 1
    result = result_of(events)
    assert result["cause"] == "parity_not_comparable"
    assert result["reason"] == "dump_a: /nowhere/a is no directory on this host"


def test_a_side_that_fails_gives_its_exception_and_stops_the_other(tmp_path: Path) -> None:
    # Side a would wait for an hour: the run ends when side b fails, not at its timeout.
    code, _, events = run(spec("stall-fail", timeout_s=3600), tmp_path / "run")
    assert code == 1
    result = result_of(events)
    assert result["cause"] == "parity_side_failed"
    assert result["reason"] == "side b failed: RuntimeError: side b refuses on purpose"


def test_layers_that_differ_in_shape_give_a_shape_result_not_a_crash(tmp_path: Path) -> None:
    code, _, events = run(spec("shape"), tmp_path / "run")
    assert code == 1
    result = result_of(events)
    assert result["cause"] == "parity_shape_mismatch", result
    assert result["summary"]["first_divergent"]["name"].startswith("Functional.linear.1.")
    assert "shape" in result["reason"]


def test_a_nan_in_side_bs_dump_is_reported_as_nan(tmp_path: Path) -> None:
    code, _, events = run(spec("nan"), tmp_path / "run")
    assert code == 1
    result = result_of(events)
    assert result["cause"] == "parity_diverged"
    summary = result["summary"]
    assert summary["nan_layers"] > 0
    first = next(layer for layer in by_type(events, "parity_layer") if layer["broken"])
    assert "nan" in first["broken"]
    # The loss went NaN on side b only: past any tolerance from the first step.
    assert summary["loss"]["first_step_past_tolerance"] == 0


def test_a_dump_over_max_dump_mb_falls_back_to_statistics_only(tmp_path: Path) -> None:
    # 1 MB is less than a 20-layer MLP's tensor dump (about 100 kB a layer).
    code, stderr, events = run(
        {**spec(), "entry": "builtin:mlp", "args": [], "layers": 20, "max_dump_mb": 1},
        tmp_path / "big",
    )
    assert code == 0, stderr
    summary = result_of(events)["summary"]
    assert summary["mode"] == "statistics"
    assert summary["broken_layers"] == 0
    logs = [e["line"] for e in by_type(events, "log")]
    assert any("over max_dump_mb" in line for line in logs)


# What the host worker sets for a parity run whose sides are on hosts of their own.
SIDE_A_NODE = {NODE_RANK: "1", NNODES: "2"}
SIDE_B_NODE = {NODE_RANK: "0", NNODES: "2"}


def hand_over(tmp_path: Path, apart: dict) -> Path:
    """Run side a's node; its handoff file, put where side b's host worker would put it."""
    code, stderr, events = run(apart, tmp_path / "side-a", **SIDE_A_NODE)
    assert code == 0, stderr
    handed = by_type(events, "artifact")
    assert [(e["name"], e["kind"]) for e in handed] == [(HANDOFF_FILE, "handoff")]
    folder = tmp_path / "handoff"
    folder.mkdir()
    shutil.copy(handed[0]["path"], folder / HANDOFF_FILE)
    return folder


@pytest.fixture(scope="module")
def side_a_node(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """model_script.py's side a run once on a node of its own, for the tests of sides apart
    that run it: side a reads none of side b's fields and behaves the same in every mode
    (only side b misbehaves), so its handoff serves each of them as their own would. The
    folder holds ``side-a/`` (its run directory) and ``handoff/`` (its file, put where side
    b's host worker would put it)."""
    folder = tmp_path_factory.mktemp("side-a-node")
    hand_over(folder, spec(a={"host": "reference"}, b={"host": "candidate"}))
    return folder


def test_sides_apart_side_a_hands_its_dump_over_and_side_b_compares_it(
    tmp_path: Path, side_a_node: Path
) -> None:
    apart = spec(a={"host": "reference"}, b={"host": "candidate", "dtype": "bfloat16"})
    folder = side_a_node / "handoff"
    side_a = list(iter_events(str(side_a_node / "side-a" / "events.jsonl")))
    assert result_of(side_a)["summary"]["side"] == "a"
    # Side a compares nothing and reports no curve: side b's node does.
    assert not by_type(side_a, "parity_layer")
    assert not by_type(side_a, "metric")

    code, stderr, events = run(
        apart, tmp_path / "side-b", **SIDE_B_NODE, **{HANDOFF_DIR: str(folder)}
    )
    assert code == 0, stderr
    summary = result_of(events)["summary"]
    assert summary["mode"] == "tensor"
    assert summary["thresholds"]["dtype"] == "bfloat16"
    assert summary["broken_layers"] == 0
    assert summary["layers"] == len(by_type(events, "parity_layer")) > 0
    assert summary["loss"]["steps"] == 2
    losses = {(m["key"], m["step"]) for m in by_type(events, "metric")}
    assert {("parity_loss/a", 1), ("parity_loss/b", 1)} <= losses
    # Side b alone ran here.
    logs = [e["line"] for e in by_type(events, "log")]
    sides = [line.split(" (")[0] for line in logs if line.startswith("parity: side ")]
    assert sides == ["parity: side b"]


def test_side_b_waits_for_side_as_dump_then_finds_its_noise(
    tmp_path: Path, side_a_node: Path
) -> None:
    apart = spec("noise", a={"host": "reference"}, b={"host": "candidate"})
    folder = tmp_path / "arrives"
    folder.mkdir()
    events_path = tmp_path / "side-b" / "events.jsonl"
    process = start(apart, tmp_path / "side-b", **SIDE_B_NODE, **{HANDOFF_DIR: str(folder)})
    try:
        wait_until(
            lambda: (
                events_path.exists()
                and any(
                    "waiting for side a" in e.get("line", "") for e in iter_events(str(events_path))
                )
            ),
            "side b waiting for side a",
            timeout=300,
        )
        # Whole or not at all, as the host worker puts it: side b looks for the name.
        shutil.copy(side_a_node / "handoff" / HANDOFF_FILE, folder / "arriving")
        (folder / "arriving").rename(folder / HANDOFF_FILE)
        process.communicate(timeout=300)
    finally:
        process.kill()
    assert process.returncode == 1
    result = result_of(list(iter_events(str(events_path))))
    assert result["cause"] == "parity_diverged"
    assert result["summary"]["first_divergent"]["name"] == "Functional.linear.1.forward.input.1"


def test_side_as_dump_over_max_dump_mb_goes_as_statistics_and_side_b_follows(
    tmp_path: Path,
) -> None:
    apart = {
        **spec(a={"labels": ["reference"]}),
        "entry": "builtin:mlp",
        "args": [],
        "layers": 20,
        "max_dump_mb": 1,
    }
    folder = hand_over(tmp_path, apart)
    side_a = list(iter_events(str(tmp_path / "side-a" / "events.jsonl")))
    assert result_of(side_a)["summary"]["mode"] == "statistics"
    # No tensor file travels.
    assert result_of(side_a)["summary"]["handoff_bytes"] < 1024 * 1024
    code, stderr, events = run(
        apart, tmp_path / "side-b", **SIDE_B_NODE, **{HANDOFF_DIR: str(folder)}
    )
    assert code == 0, stderr
    summary = result_of(events)["summary"]
    assert summary["mode"] == "statistics"
    assert summary["broken_layers"] == 0
    assert summary["layers"] > 20
    assert not list((tmp_path / "side-b" / "parity" / "b").rglob("*.pt"))


def test_a_side_that_fails_on_its_own_host_gives_its_exception_before_any_wait(
    tmp_path: Path,
) -> None:
    apart = spec("fail", a={"host": "reference"})
    code, _, events = run(apart, tmp_path / "side-b", **SIDE_B_NODE, **{HANDOFF_DIR: str(tmp_path)})
    assert code == 1
    result = result_of(events)
    assert result["cause"] == "parity_side_failed"
    assert "side b failed: RuntimeError: side b refuses on purpose" in result["reason"]
