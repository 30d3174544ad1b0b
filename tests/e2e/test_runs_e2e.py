"""Runs through the whole platform: web, control worker, Redis, host worker, runner."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest

from harness.polling import pauses
from harness.stack import HOST, Platform
from tests.reliability.stacks import ECHO_RUN, LONG_ECHO_RUN, start_long_echo_run
from tests.waiting import alive, wait_until
from workers.contract.events import EVENTS_FILE
from workers.events import EventWriter, iter_events
from workers.host.agent import SUPERVISOR_PID

pytestmark = pytest.mark.e2e
FAST = {"matmul_size": 256, "train_steps": 20}


def on_disk(platform: Platform, run_id: int) -> list[dict]:
    path = platform.run_dir(run_id) / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_smoke_run_submitted_over_the_api_succeeds_with_its_metrics(platform: Platform) -> None:
    submitted = platform.submit(name="e2e smoke", **FAST)
    assert submitted["status"] == "queued"
    run = platform.wait(submitted["id"])
    assert run["status"] == "succeeded", platform.tail()
    assert (run["host"], run["exit_cause"], run["exit_code"]) == (HOST, "completed", 0)
    assert [(s["name"], s["status"]) for s in run["steps"]] == [
        ("device", "pass"),
        ("matmul", "pass"),
        ("train", "pass"),
    ]
    series = platform.api("GET", f"runs/{run['id']}/metrics/", params={"key": "train/loss"})
    points = series.json()["points"]
    assert [step for step, _ in points] == list(range(20))
    assert points[-1][1] < points[0][1]
    logs = platform.api("GET", f"runs/{run['id']}/events/", params={"type": "log"}).json()
    lines = [event["data"]["line"] for event in logs["results"]]
    # The worker snapshots the run's interpreter first and says so in the run's log.
    assert lines[0].startswith("environment snapshot ")
    assert lines[1].startswith("npulab runner")
    snapshot = platform.api("GET", f"snapshots/{run['snapshot']}/").json()
    assert snapshot["host"] == HOST
    assert snapshot["data"]["python"]["executable"] == sys.executable
    assert snapshot["summary"]["torch"].startswith("2.")
    # The lease was released: the host is free again.
    assert platform.api("GET", f"hosts/{HOST}/").json()["busy_devices"] == 0


def test_no_event_is_lost_while_the_web_server_is_down(platform: Platform) -> None:
    steps = 1500
    run_id = platform.submit(matmul_size=256, train_steps=steps)["id"]
    platform.wait(run_id, {"running"})
    deadline = time.monotonic() + 60
    pause = pauses()
    while not platform.api("GET", f"runs/{run_id}/metrics/").json()["metrics"]:
        assert time.monotonic() < deadline
        time.sleep(next(pause))

    platform.stop_web()
    time.sleep(4)  # the runner goes on writing; the worker spools and retries
    platform.start_web()

    run = platform.wait(run_id)
    assert run["status"] == "succeeded", platform.tail()
    points = platform.api("GET", f"runs/{run_id}/metrics/", params={"key": "train/loss"})
    assert [step for step, _ in points.json()["points"]] == list(range(steps))

    written = on_disk(platform, run_id)
    stored_logs = platform.api(
        "GET", f"runs/{run_id}/events/", params={"type": "log", "limit": 10000}
    ).json()
    assert stored_logs["count"] == sum(1 for e in written if e["type"] == "log")
    written_metrics = sum(1 for e in written if e["type"] == "metric")
    summary = platform.api("GET", f"runs/{run_id}/metrics/").json()["metrics"]
    assert sum(m["points"] for m in summary) == written_metrics


def test_cancel_kills_the_run_and_frees_the_device(platform: Platform) -> None:
    run_id, child = start_long_echo_run(platform)

    response = platform.api("POST", f"runs/{run_id}/cancel/")
    assert response.status_code == 200
    run = platform.wait(run_id, timeout=60)
    assert (run["status"], run["exit_cause"]) == ("cancelled", "cancelled")
    assert run["exit_reason"] == "cancelled by e2e"
    # The kill is sent before the run is reported; the child goes a moment later.
    wait_until(lambda: not alive(child), f"the run's child {child} to die", timeout=60)
    assert platform.api("GET", f"hosts/{HOST}/").json()["busy_devices"] == 0


def test_a_run_over_its_timeout_fails_with_the_reason(platform: Platform) -> None:
    run = platform.wait(platform.submit(**{**LONG_ECHO_RUN, "timeout_s": 3})["id"])
    assert (run["status"], run["exit_cause"]) == ("failed", "timeout")
    assert run["exit_reason"] == "timed out after 3 s"
    assert not run["infrastructure_failure"]


def test_a_run_no_host_can_take_waits_with_the_reason(platform: Platform) -> None:
    refused = platform.api("POST", "runs/", json={"kind": "smoke", "device_type": "npu"})
    assert refused.status_code == 400
    assert refused.json()["device_type"][0].startswith("no npu host is registered: e2e-cpu has")
    run_id = platform.submit(device_type="npu", devices=8, wait_for_host=True)["id"]
    deadline = time.monotonic() + 30
    pause = pauses()
    while not platform.run(run_id)["queue_reason"].startswith("no registered host could take"):
        assert time.monotonic() < deadline, platform.run(run_id)
        time.sleep(next(pause))
    assert platform.api("POST", f"runs/{run_id}/cancel/").json()["status"] == "cancelled"


def test_a_run_that_ended_while_its_worker_was_down_is_finished_by_the_next_not_lost(
    platform: Platform,
) -> None:
    run_id = platform.submit(**{**ECHO_RUN, "hold_s": 3})["id"]
    platform.wait(run_id, {"running"})
    supervisor = platform.run_dir(run_id) / SUPERVISOR_PID
    wait_until(lambda: supervisor.exists() and supervisor.read_text(), "the supervisor's pid", 60)
    platform.kill_worker()
    # With no worker, the run ends by itself: its supervisor writes the result and exits.
    spool = str(platform.run_dir(run_id) / EVENTS_FILE)
    pid = int(supervisor.read_text())
    wait_until(lambda: not alive(pid), f"run {run_id}'s supervisor {pid} to end", 60)
    assert [event["status"] for event in iter_events(spool) if event["type"] == "result"] == [
        "succeeded"
    ]
    platform.start_worker()
    run = platform.wait(run_id, timeout=120)
    # Reported as it ended, by the next worker process: not lost, and not to run again.
    assert (run["status"], run["exit_cause"]) == ("succeeded", "completed"), run
    assert run["exit_reason"] == "echoed 3 words"
    assert run["exit_code"] == 0
    assert not run["infrastructure_failure"]
    assert run["attempt"] == 1


def test_a_restarted_worker_kills_what_it_left_behind_and_the_run_is_lost(
    platform: Platform,
) -> None:
    run_id, child = start_long_echo_run(platform)

    platform.kill_worker()
    os.kill(child, 0)  # the run outlives the worker process ...
    # ... and writes on, with no worker to forward what it writes (as the run would write
    # it: appended to its events.jsonl, whose last line it left unfinished when killed).
    events = EventWriter(str(platform.run_dir(run_id) / EVENTS_FILE))
    events.log("stdout", "written while no worker forwarded it")
    events.close()
    with open(platform.run_dir(run_id) / EVENTS_FILE, "a") as spool:
        spool.write('{"type": "log", "stream": "stdout", "line": "cut sh')
    platform.start_worker()
    run = platform.wait(run_id, timeout=60)
    # ... until the new worker process kills it, and the platform hears why.
    assert (run["status"], run["exit_cause"]) == ("lost", "worker_lost")
    assert run["exit_reason"] == f"the host worker on {HOST} is no longer running it (it restarted)"
    assert run["infrastructure_failure"]
    # What it wrote meanwhile reached the platform first, the line cut short as a line.
    lines = [
        event["data"]["line"]
        for event in platform.api("GET", f"runs/{run_id}/events/?type=log").json()["results"]
    ]
    assert "written while no worker forwarded it" in lines, lines
    assert any("cut sh" in line for line in lines), lines
    # Killed; an orphan now, so init reaps it, when it gets to it.
    wait_until(lambda: not alive(child), f"the run's child {child} to die", 60)
    assert platform.api("GET", f"hosts/{HOST}/").json()["busy_devices"] == 0
    # And the host takes new work.
    assert platform.wait(platform.submit(**ECHO_RUN)["id"])["status"] == "succeeded"
