"""The stack the reliability tests break: the end-to-end platform on services they control."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings

from harness.stack import Platform, create_postgres_database
from tests.waiting import wait_until
from workers.processes import CHILD_PID_FILE

# The platform's timeouts, short enough that a test sees the repairs in seconds.
FAST_REPAIRS = {
    # A dispatched run whose message the broker lost goes back to the queue after this.
    # Not much less: on a loaded machine a host takes seconds to claim its run.
    "NPULAB_DISPATCH_TIMEOUT_S": "10",
}


# A run through every part of the stack (web, broker, control worker, host worker, runner,
# events) that imports no torch: the test-only echo kind. For a run that must go through
# after a fault, where a smoke run's seconds of torch start-up test nothing of the repair.
ECHO_RUN = {"kind": "echo", "device_type": "cpu", "words": ["after", "the", "fault"]}
# An echo run that stays running until stopped, for a test that needs a live run and its
# child: a long smoke run would import torch and keep a core busy training all along.
LONG_ECHO_RUN = {
    "kind": "echo",
    "device_type": "cpu",
    "words": ["holding"],
    "hold_s": 3600,
    "timeout_s": 3600,
}


def with_port(url: str, port: int) -> str:
    """``url`` pointing at 127.0.0.1:``port`` instead of its own host and port."""
    parts = urlsplit(url)
    user = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{port}"))


@contextlib.contextmanager
def postgres_database(server_url: str, name: str) -> Iterator[str]:
    """A fresh database on the server of ``server_url``, dropped afterwards."""
    url, drop = create_postgres_database(server_url, name)
    try:
        yield url
    finally:
        drop()


def own_database(var_dir: Path, label: str) -> contextlib.AbstractContextManager[str]:
    """The test's own database: on the PostgreSQL server when there is one, else SQLite."""
    server = settings.SERVICES.database_url
    if server:
        return postgres_database(server, f"npulab_rel_{label}_{os.getpid()}")
    return contextlib.nullcontext(f"sqlite:///{var_dir / 'reliability.sqlite3'}")


@contextlib.contextmanager
def running_platform(
    var_dir: Path, database_url: str, broker_url: str, **env: str
) -> Iterator[Platform]:
    """The web server, the control worker with beat and a CPU host worker, stopped after."""
    platform = Platform(var_dir, database_url, broker_url)
    platform.env.update(FAST_REPAIRS)
    platform.env.update(env)
    try:
        yield platform.launch()
    finally:
        platform.shutdown()


def run_once_each(platform: Platform, run_ids: list[int]) -> list[dict[str, Any]]:
    """The runs' final rows, after checking that each ran exactly once.

    One attempt, claimed once, and one attempt directory on the host: a run the broker
    delivered twice would have a second supervisor start or a second claim refused
    after it had started.
    """
    runs = [platform.run(run_id) for run_id in run_ids]
    for run in runs:
        assert run["status"] == "succeeded", (run, platform.tail())
        assert [a["number"] for a in run["attempts"]] == [1], run["attempts"]
        attempts = sorted(p.name for p in platform.run_dir(run["id"]).parent.glob("attempt-*"))
        assert attempts == ["attempt-1"], attempts
        # The runner says who it is once per start of a supervisor.
        starts = [
            line
            for line in (platform.run_dir(run["id"]) / "events.jsonl").read_text().splitlines()
            if json.loads(line).get("line", "").startswith("npulab runner ")
        ]
        assert len(starts) == 1, starts
    return runs


def start_long_echo_run(platform: Platform) -> tuple[int, int]:
    """A run that stays running until stopped, once its child process is up: (run id, child
    pid)."""
    run_id = platform.submit(**LONG_ECHO_RUN)["id"]
    platform.wait(run_id, {"running"})
    child_pid = platform.run_dir(run_id) / CHILD_PID_FILE
    wait_until(child_pid.exists, f"run {run_id}'s child process", 60)
    return run_id, int(child_pid.read_text())


def log_lines(platform: Platform, name: str) -> list[str]:
    path = platform.logs / f"{name}.log"
    return path.read_text(errors="replace").splitlines() if path.exists() else []


def pid_of(platform: Platform, name: str) -> int:
    process = platform.processes[name].process
    assert process is not None
    return process.pid


def events_once(platform: Platform, run_id: int) -> tuple[int, int]:
    """(lost, duplicated) events of a run's only attempt: its file against what is stored.

    Logs are counted one by one and metric points per series, so an event stored twice
    shows even where another went missing.
    """
    written = [
        json.loads(line)
        for line in (platform.run_dir(run_id) / "events.jsonl").read_text().splitlines()
    ]
    logs = platform.api(
        "GET", f"runs/{run_id}/events/", params={"type": "log", "limit": 100000}
    ).json()["count"]
    on_disk_logs = sum(1 for event in written if event["type"] == "log")
    summary = platform.api("GET", f"runs/{run_id}/metrics/").json()["metrics"]
    stored_points = {metric["key"]: metric["points"] for metric in summary}
    on_disk_points: dict[str, int] = {}
    for event in written:
        if event["type"] == "metric":
            on_disk_points[event["key"]] = on_disk_points.get(event["key"], 0) + 1
    lost = max(0, on_disk_logs - logs)
    duplicated = max(0, logs - on_disk_logs)
    for key in on_disk_points.keys() | stored_points.keys():
        difference = stored_points.get(key, 0) - on_disk_points.get(key, 0)
        lost += max(0, -difference)
        duplicated += max(0, difference)
    return lost, duplicated
