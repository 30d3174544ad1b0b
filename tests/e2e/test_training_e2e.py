"""Training runs through the whole platform: checkpoints stored, a lost host, a resume."""

from __future__ import annotations

import io
import time

import pytest
import torch

from harness.polling import pauses
from harness.stack import HOST, Platform

pytestmark = pytest.mark.e2e
SECOND_HOST = "e2e-cpu-2"


def training(platform: Platform, **spec) -> dict:
    return platform.submit(kind="training", entry="builtin:cnn", **spec)


def loss_steps(platform: Platform, run_id: int) -> list[int]:
    body = platform.api("GET", f"runs/{run_id}/metrics/", params={"key": "loss"}).json()
    return [step for step, _ in body["points"]]


def test_the_reference_job_trains_and_its_checkpoints_are_stored(platform: Platform) -> None:
    run = platform.wait(training(platform, max_steps=150, checkpoint_every_steps=50)["id"])
    assert run["status"] == "succeeded", platform.tail()
    losses = platform.api("GET", f"runs/{run['id']}/metrics/", params={"key": "loss"}).json()
    values = [value for _, value in losses["points"]]
    assert len(values) == 150
    assert sum(values[-10:]) / 10 < 0.5 * sum(values[:10]) / 10
    assert run["result"]["summary"]["loss_last"] == values[-1]
    checkpoints = {c["step"]: c for c in run["checkpoints"]}
    assert sorted(checkpoints) == [49, 99, 149]
    assert {c["status"] for c in checkpoints.values()} == {"stored"}
    download = platform.api("GET", f"runs/{run['id']}/checkpoints/149/download/")
    state = torch.load(io.BytesIO(download.content), map_location="cpu", weights_only=False)
    assert (state["step"], state["data_position"]) == (149, 150)
    assert [a["status"] for a in run["attempts"]] == ["succeeded"]


def test_a_lost_host_restarts_the_run_on_another_host_from_its_checkpoint(
    platform: Platform,
) -> None:
    # Enough steps past the checkpoint of step 99 that the host is killed mid-run even
    # on a fast machine (it is killed once that checkpoint is stored).
    run_id = training(platform, max_steps=400, checkpoint_every_steps=50)["id"]
    deadline = time.monotonic() + 120
    pause = pauses()
    while True:
        run = platform.run(run_id)
        stored = [c["step"] for c in run["checkpoints"] if c["status"] == "stored"]
        if stored and max(stored) >= 99:
            break
        assert run["status"] in ("queued", "dispatched", "running"), run
        assert time.monotonic() < deadline, platform.tail()
        time.sleep(next(pause))
    platform.start_worker(SECOND_HOST)
    try:
        # The first host dies: its worker and every process of the run.
        platform.kill_worker()
        platform.kill_run_processes(run_id)
        # Up to 300 more steps: minutes on a loaded 2-core machine.
        run = platform.wait(run_id, timeout=900)
        assert run["status"] == "succeeded", platform.tail()
        first, second = run["attempts"]
        assert (first["host"], first["status"], first["exit_cause"]) == (
            HOST,
            "lost",
            "worker_lost",
        )
        assert first["infrastructure_failure"] is True
        assert (second["host"], second["status"]) == (SECOND_HOST, "succeeded")
        assert second["resumed_from_step"] >= 99
        assert run["restarts"] == 1
        # One point per step: the lost attempt's points after the checkpoint were replaced.
        assert loss_steps(platform, run_id) == list(range(400))
        logs = platform.api(
            "GET", f"runs/{run_id}/events/", params={"type": "log", "limit": 5000}
        ).json()["results"]
        fetched = f"attempt 2: fetched the checkpoint of step {second['resumed_from_step']}"
        assert any(event["data"]["line"].startswith(fetched) for event in logs)
    finally:
        platform.kill_worker(SECOND_HOST)
        platform.start_worker()
