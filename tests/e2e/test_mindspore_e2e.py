"""MindSpore runs through the whole platform, on a host worker with a MindSpore interpreter."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.stack import Platform
from tests.e2e.conftest import write_script
from tests.mindspore.interpreter import PARALLEL_SCRIPT, SCRIPT, require_mindspore
from workers.processes import kill_registered

pytestmark = pytest.mark.e2e
MS_HOST = "e2e-ms"
BAD_GRAPH = Path(__file__).resolve().parents[1] / "mindspore" / "bad_graph.py"


@pytest.fixture(scope="module")
def ms_host(platform: Platform) -> Iterator[str]:
    python = require_mindspore()
    # The label is the operator's (host_token --labels); the worker's own say is not trusted.
    # Four devices: two runs of two msrun workers each at once.
    platform.start_worker(MS_HOST, "--mindspore-python", python, devices=4, labels="mindspore")
    platform.wait_online(MS_HOST, timeout=120)
    yield MS_HOST
    platform.kill_worker(MS_HOST)


def log_lines(platform: Platform, run_id: int) -> list[str]:
    events = platform.api(
        "GET", f"runs/{run_id}/events/", params={"type": "log", "limit": 5000}
    ).json()["results"]
    return [event["data"]["line"] for event in events]


def test_a_mindspore_run_killed_with_sigkill_resumes_from_its_ckpt(
    platform: Platform, ms_host: str
) -> None:
    # The first attempt waits after its first checkpoint until it is killed.
    run_id = platform.submit(
        kind="training",
        framework="mindspore",
        mode="graph",
        entry=str(SCRIPT),
        args=["2", "pause"],
        checkpoint_dir="ckpt",
        max_restarts=1,
        timeout_s=600,
    )["id"]
    run = platform.wait_for_stored_checkpoint(run_id, timeout=300)
    assert run["host"] == ms_host
    # kill -9 of every training process of the attempt (not the supervisor).
    kill_registered(str(platform.run_dir(run_id, host=ms_host)), signal.SIGKILL)
    run = platform.wait(run_id, timeout=300)
    assert run["status"] == "succeeded", platform.tail()
    first, second = run["attempts"]
    assert (first["status"], first["exit_cause"]) == ("failed", "process_exit")
    assert second["status"] == "succeeded"
    lines = log_lines(platform, run_id)
    assert any(line.startswith("resuming from ") and "tiny-1_8.ckpt" in line for line in lines)
    assert "resumed from tiny-1_8.ckpt" in lines
    assert any(line.startswith("epoch: 2 step: 8, loss is ") for line in lines)
    assert {c["status"] for c in run["checkpoints"]} == {"stored"}
    # LossMonitor's lines became the run's loss series (the stdout recogniser).
    losses = platform.api("GET", f"runs/{run_id}/metrics/", params={"key": "loss"}).json()
    assert len(losses["points"]) >= 16


def test_a_failed_mindspore_run_ends_with_a_diagnosis_naming_its_cause(
    platform: Platform, ms_host: str
) -> None:
    # Graph mode cannot compile a set literal: MindSpore's own error, the script's fault.
    run_id = platform.submit(
        kind="training",
        framework="mindspore",
        mode="graph",
        entry=str(BAD_GRAPH),
        max_restarts=2,
        timeout_s=300,
    )["id"]
    run = platform.wait(run_id, timeout=300)
    assert run["status"] == "failed", platform.tail()
    assert run["host"] == ms_host
    diagnosis = run["diagnosis"]
    assert (diagnosis["rule"], diagnosis["category"], diagnosis["blame"]) == (
        "ms-graph-syntax",
        "graph-compile",
        "user-code",
    )
    assert diagnosis["evidence"][0]["text"].startswith("RuntimeError: Unsupported expression 'Set'")
    assert "PyNative" in diagnosis["fix"]
    # The script's own mistake is not retried, whatever max_restarts says.
    assert run["restarts"] == 0
    listed = platform.api("GET", "runs/", params={"category": "graph-compile"}).json()["results"]
    assert run_id in [found["id"] for found in listed]


def test_two_msrun_workers_train_data_parallel_and_one_failing_ends_its_run(
    platform: Platform, ms_host: str, scripts_dir: Path
) -> None:
    # Outside the checkout: the diagnosis takes the checkout's files for npulab's own.
    script = str(write_script(scripts_dir, "train_parallel.py", PARALLEL_SCRIPT.read_text()))
    spec = {"kind": "training", "framework": "mindspore", "devices": 2, "entry": script}
    trains = platform.submit(**spec, timeout_s=600)["id"]
    # Rank 1 raises after its first step; MindSpore's scheduler lets go of the rank msrun
    # killed after MS_NODE_TIMEOUT (about 30 s by default).
    fails = platform.submit(**spec, args=["1"], env={"MS_NODE_TIMEOUT": "15"}, timeout_s=600)["id"]

    run = platform.wait(trains, timeout=600)
    assert run["status"] == "succeeded", platform.tail()
    lines = log_lines(platform, trains)
    assert any(line.startswith("msrun: 2 workers, 2 here (node rank 0)") for line in lines)
    # Both workers' logs, each line with its rank; the same weights on both, though each
    # trained on its own half of the data: the gradients went through an allreduce.
    weights = {line.split(": ")[0]: line for line in lines if ": weights " in line}
    assert set(weights) == {"[rank0]", "[rank1]"}, lines
    assert weights["[rank0]"][len("[rank0]") :] == weights["[rank1]"][len("[rank1]") :]
    for rank in ("[rank0]", "[rank1]"):
        assert any(line.startswith(f"{rank}: epoch: 2 step: 4, loss is ") for line in lines)
    # The loss series is rank 0's: 4 steps of its shard in each of 2 epochs.
    printed = [float(line.rsplit(" ", 1)[1]) for line in lines if "[rank0]: epoch:" in line]
    losses = platform.api("GET", f"runs/{trains}/metrics/", params={"key": "loss"}).json()
    assert [value for _, value in losses["points"]] == printed
    assert len(printed) == 8

    run = platform.wait(fails, timeout=600)
    assert run["status"] == "failed", platform.tail()
    assert run["exit_reason"].endswith(": rank 1: ValueError: rank 1 gives up")
    diagnosis = run["diagnosis"]
    assert (diagnosis["rule"], diagnosis["blame"]) == ("python-user-exception", "user-code")
    assert diagnosis["line"].startswith("[rank1]: ValueError: rank 1 gives up (raised at ")
