"""The host agent: registration, heartbeats, claims and shutdown, with runs stubbed out."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.waiting import wait_until
from tests.workers.host.fakes import FakePlatform, host_config
from workers.host import agent as agent_module
from workers.host.agent import HostAgent
from workers.host.client import PlatformRejected


class StubExecution:
    """Stands in for RunExecution: runs until it is stopped, records why."""

    started: list[StubExecution] = []

    def __init__(self, agent: HostAgent, run_id: int, attempt: int, claim: dict[str, Any]):
        self.run_id = run_id
        self.attempt = attempt
        self.claim = claim
        self.stop_reasons: list[str] = []
        self._stopped = threading.Event()
        StubExecution.started.append(self)

    def run(self) -> None:
        self._stopped.wait(30)

    def stop(self, reason: str) -> None:
        self.stop_reasons.append(reason)
        self._stopped.set()


@pytest.fixture
def stub_runs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[StubExecution]]:
    StubExecution.started = []
    monkeypatch.setattr(agent_module, "RunExecution", StubExecution)
    yield StubExecution.started
    for execution in StubExecution.started:
        execution.stop("test over")


@pytest.fixture
def snapshots(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int | None]]:
    """The snapshots the agent collects and sends, without running the collector."""
    sent: list[tuple[str, int | None]] = []

    def collect_and_send(client: Any, python: str, run_id: int | None = None) -> tuple[dict, dict]:
        sent.append((python, run_id))
        return {"hash": "0" * 64, "new_version": False}, {}

    monkeypatch.setattr(agent_module, "collect_and_send", collect_and_send)
    return sent


def start_execution(agent: HostAgent, platform: FakePlatform, run_id: int) -> threading.Thread:
    platform.claims[run_id] = {"spec": {"kind": "training"}, "devices": [0], "resume": None}
    thread = threading.Thread(target=agent.execute, args=(run_id, 1), daemon=True)
    thread.start()
    wait_until(lambda: run_id in agent.running_ids(), f"run {run_id} to be running")
    return thread


# -- registration --------------------------------------------------------------


def test_register_retries_while_the_platform_is_unavailable(
    agent: HostAgent, platform: FakePlatform
) -> None:
    platform.fail_next("register", 3)
    reply = agent.register(retry_s=0)

    assert platform.count("register") == 4
    assert reply["name"] == agent.name == "fake-host"
    assert agent.queue == "host.fake-host"
    facts = platform.calls[-1][1][0]
    assert facts["device_type"] == "cpu"
    assert [device["index"] for device in facts["devices"]] == [0]
    assert agent.devices == facts["devices"]


def test_register_stops_at_once_when_the_platform_rejects_the_host(
    agent: HostAgent, platform: FakePlatform
) -> None:
    platform.reject("register", 401, {"detail": "invalid host token"})
    with pytest.raises(PlatformRejected, match="invalid host token"):
        agent.register(retry_s=0)
    assert platform.count("register") == 1
    assert agent.name == ""


# -- claims and the registry of running runs ----------------------------------


def test_execute_drops_a_claim_refused_with_409(
    agent: HostAgent, platform: FakePlatform, stub_runs: list[StubExecution], work_dir: Path
) -> None:
    agent.execute(41, 1)  # the fake platform has no claim for it: 409

    assert platform.count("claim") == 1
    assert stub_runs == []
    assert agent.running_ids() == []
    assert not (work_dir / "runs").exists()


def test_execute_gives_up_a_claim_once_the_outage_outlasts_claim_retry_s(
    agent: HostAgent, platform: FakePlatform, stub_runs: list[StubExecution]
) -> None:
    platform.claims[42] = {"spec": {}, "devices": [0]}
    platform.go_down("claim")
    agent.execute(42, 1)  # claim_retry_s is 0: no second try
    assert platform.count("claim") == 1
    assert stub_runs == []


def test_execute_rides_out_a_short_outage_of_the_claim(
    platform: FakePlatform, work_dir: Path, stub_runs: list[StubExecution]
) -> None:
    agent = HostAgent(host_config(work_dir, claim_retry_s=30.0), platform)
    platform.fail_next("claim", 1)
    thread = start_execution(agent, platform, 43)

    assert platform.count("claim") == 2
    assert [(run.run_id, run.attempt, run.claim["devices"]) for run in stub_runs] == [(43, 1, [0])]
    stub_runs[0].stop("done")
    thread.join(timeout=30)
    assert agent.running_ids() == []


def test_a_run_is_listed_as_running_only_while_it_executes(
    agent: HostAgent, platform: FakePlatform, stub_runs: list[StubExecution]
) -> None:
    first = start_execution(agent, platform, 5)
    second = start_execution(agent, platform, 3)
    assert agent.running_ids() == [3, 5]

    stub_runs[0].stop("done")
    first.join(timeout=30)
    assert agent.running_ids() == [3]
    stub_runs[1].stop("done")
    second.join(timeout=30)
    assert agent.running_ids() == []


# -- heartbeats ------------------------------------------------------------------


def run_heartbeats(agent: HostAgent) -> tuple[threading.Event, threading.Thread]:
    stop = threading.Event()
    thread = threading.Thread(target=agent.heartbeat_forever, args=(stop,), daemon=True)
    thread.start()
    return stop, thread


def test_heartbeat_reports_running_runs_and_cancels_those_the_reply_names(
    agent: HostAgent,
    platform: FakePlatform,
    stub_runs: list[StubExecution],
    snapshots: list[tuple[str, int | None]],
) -> None:
    start_execution(agent, platform, 5)
    start_execution(agent, platform, 6)
    platform.heartbeat_replies.append({"cancel": [6, 99], "snapshot": False})
    stop, thread = run_heartbeats(agent)
    try:
        wait_until(lambda: stub_runs[1].stop_reasons, "run 6 to be stopped")
    finally:
        stop.set()
        thread.join(timeout=30)

    first_beat = next(args for name, args in platform.calls if name == "heartbeat")
    assert first_beat == ([5, 6],)
    assert stub_runs[1].stop_reasons == ["cancel requested"]
    assert stub_runs[0].stop_reasons == []
    assert snapshots == []
    assert not thread.is_alive()


def test_heartbeat_reply_asking_for_a_snapshot_sends_one_of_the_run_interpreter(
    agent: HostAgent, platform: FakePlatform, snapshots: list[tuple[str, int | None]]
) -> None:
    platform.heartbeat_replies.append({"cancel": [], "snapshot": True})
    stop, thread = run_heartbeats(agent)
    try:
        wait_until(lambda: snapshots, "a snapshot to be sent")
    finally:
        stop.set()
        thread.join(timeout=30)
    assert snapshots[0] == (agent.config.python, None)


def test_heartbeat_keeps_beating_through_an_outage_and_a_refusal(
    agent: HostAgent, platform: FakePlatform, stub_runs: list[StubExecution]
) -> None:
    start_execution(agent, platform, 5)
    platform.fail_next("heartbeat", 2)
    platform.heartbeat_replies.append({"cancel": [5]})
    stop, thread = run_heartbeats(agent)
    try:
        wait_until(lambda: stub_runs[0].stop_reasons, "the cancel after the outage")
        platform.reject("heartbeat", 403, {"detail": "host disabled"})
        beats = platform.count("heartbeat")
        wait_until(lambda: platform.count("heartbeat") > beats + 2, "beats after a refusal")
    finally:
        stop.set()
        thread.join(timeout=30)
    assert platform.failed["heartbeat"] == 2
    assert not thread.is_alive()


def test_only_one_snapshot_is_collected_at_a_time(
    agent: HostAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    calls: list[str] = []

    def collect_and_send(client: Any, python: str, run_id: int | None = None) -> tuple[dict, dict]:
        calls.append(python)
        release.wait(30)
        return {}, {}

    monkeypatch.setattr(agent_module, "collect_and_send", collect_and_send)
    agent.send_snapshot_soon()
    wait_until(lambda: calls, "the first snapshot to start")
    agent.send_snapshot_soon()  # one is on its way: not another
    assert [thread.name for thread in threading.enumerate()].count("snapshot") == 1
    assert len(calls) == 1

    release.set()
    # Once the first is done, the next request collects again.
    wait_until(lambda: agent.send_snapshot_soon() or len(calls) == 2, "a second snapshot")


# -- shutdown ----------------------------------------------------------------------


def test_shutdown_stops_every_running_execution(
    agent: HostAgent, platform: FakePlatform, stub_runs: list[StubExecution]
) -> None:
    threads = [start_execution(agent, platform, run_id) for run_id in (1, 2)]
    agent.shutdown()
    for thread in threads:
        thread.join(timeout=30)

    assert agent.shutting_down.is_set()
    assert [run.stop_reasons for run in stub_runs] == [["the host worker is shutting down"]] * 2
    assert agent.running_ids() == []


def test_cancel_of_a_run_that_is_not_here_is_ignored(agent: HostAgent) -> None:
    agent.cancel(12345)
    assert agent.running_ids() == []
