"""PostgreSQL goes away for longer than a run's heartbeat timeout and comes back: the web
server and the control worker reconnect by themselves, the run in flight finishes with
every event stored once, and a run submitted after the outage runs (issue 14, "The
reliability suite").

The machine's PostgreSQL serves other test sessions, so it is not restarted: the stack
reaches it through a TCP proxy that the test stops (every connection reset, new ones
refused) and starts again, which is what a restarted server looks like to a client.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import requests
from django.conf import settings

from harness.services import POSTGRES
from tests.e2e.conftest import require
from tests.reliability.faults import TcpProxy, private_redis
from tests.reliability.stacks import (
    ECHO_RUN,
    events_once,
    log_lines,
    pid_of,
    postgres_database,
    running_platform,
    with_port,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e

# The least the setting takes (NPULAB_RUN_HEARTBEAT_TIMEOUT_S): the outage must outlast it.
HEARTBEAT_TIMEOUT_S = 10
# Longer than the run heartbeat timeout, by five of the host's heartbeats: the heartbeats
# the platform could not record while it was down must not make it call the run lost.
OUTAGE_S = HEARTBEAT_TIMEOUT_S + 5
STEPS = 300


def healthz(url: str) -> int:
    try:
        return requests.get(f"{url}/healthz", timeout=10).status_code
    except requests.RequestException:
        return 0


def test_the_stack_rides_out_a_postgresql_outage(tmp_path: Path) -> None:
    server = settings.SERVICES.database_url
    require(bool(server), "PostgreSQL is not configured (SQLite has no server to restart)")
    broker = private_redis(tmp_path / "redis")
    proxy = TcpProxy(POSTGRES)
    proxy.start()
    database = f"npulab_rel_pg_{os.getpid()}"
    try:
        with (
            postgres_database(server, database) as direct_url,
            running_platform(
                tmp_path,
                with_port(direct_url, proxy.port),
                broker.url,
                NPULAB_RUN_HEARTBEAT_TIMEOUT_S=str(HEARTBEAT_TIMEOUT_S),
                # A device for the run submitted after the outage, beside the one in flight.
                NPULAB_DEVICES="2",
            ) as platform,
        ):
            pids = {name: pid_of(platform, name) for name in platform.processes}
            run_id = platform.submit(matmul_size=256, train_steps=STEPS)["id"]
            platform.wait(run_id, {"running"})
            wait_until(
                lambda: platform.api("GET", f"runs/{run_id}/metrics/").json()["metrics"],
                "the run's first metrics",
                60,
            )

            proxy.stop()
            down_at = time.monotonic()
            statuses = set()
            while time.monotonic() - down_at < OUTAGE_S:
                statuses.add(healthz(platform.url))
                time.sleep(0.5)
            assert 200 not in statuses, statuses
            proxy.start()
            up_at = time.monotonic()

            wait_until(lambda: healthz(platform.url) == 200, "the web server to answer", 120)
            web_back = time.monotonic() - up_at
            after = platform.submit(**ECHO_RUN)["id"]
            assert platform.wait(after, timeout=600)["status"] == "succeeded", platform.tail()
            recovered = time.monotonic() - up_at

            run = platform.wait(run_id, timeout=600)
            assert run["status"] == "succeeded", (run, platform.tail())
            assert [a["number"] for a in run["attempts"]] == [1], run["attempts"]
            lost, duplicated = events_once(platform, run_id)
            points = platform.api(
                "GET", f"runs/{run_id}/metrics/", params={"key": "train/loss"}
            ).json()["points"]
            assert [step for step, _ in points] == list(range(STEPS))
            # Nobody restarted anything: the same processes reconnected.
            assert {name: pid_of(platform, name) for name in platform.processes} == pids
            assert all(p.returncode is None for p in platform.processes.values())
            tracebacks = sum(
                line.startswith("Traceback") for line in log_lines(platform, "control")
            )
            print(
                f"injected: PostgreSQL unreachable for {OUTAGE_S} s (proxy stopped; "
                f"healthz answered {sorted(statuses)}) with run {run_id} in flight; "
                f"measured: web answered {web_back:.1f} s after, a new run succeeded "
                f"{recovered:.1f} s after; the run in flight succeeded in 1 attempt, "
                f"events lost {lost}, duplicated {duplicated}; "
                f"control worker tracebacks {tracebacks}"
            )
            assert (lost, duplicated) == (0, 0)
    finally:
        proxy.stop()
        broker.stop()
