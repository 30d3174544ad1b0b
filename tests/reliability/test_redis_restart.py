"""Redis killed with runs queued, dispatched and running, then started again, empty: every
run finishes exactly once, and the consumers say so in one line per reconnect attempt
rather than a traceback each (issue 14, "The reliability suite").

Redis holds nothing the database does not: a dispatch message lost with it is repaired
by the sweeper (the run goes back to the queue after NPULAB_DISPATCH_TIMEOUT_S), a
placement request by the scheduler's tick.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.reliability.faults import private_redis
from tests.reliability.stacks import (
    ECHO_RUN,
    events_once,
    log_lines,
    own_database,
    pid_of,
    run_once_each,
    running_platform,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e

DEVICES = 2
RUNS = 6
DURING = 2
# The runs on the devices when Redis dies are smoke runs: in flight across its death, their
# metric points counted. The runs queued behind them, and those submitted while it is
# down, need only be placed, dispatched and run once it is back: echo runs (no torch).
FAST = {"matmul_size": 128, "train_steps": 20}
RECONNECTING = {
    # Celery's consumer, in the control worker and in the host worker.
    "consumer": "Cannot connect to redis://",
    # The web server's placement requests and dispatches (npulab.runs.dispatch).
    "web": "the broker is unreachable",
}


def tracebacks(lines: list[str]) -> int:
    return sum(line.startswith("Traceback (most recent call last)") for line in lines)


def test_runs_queued_and_dispatching_survive_a_killed_redis(tmp_path: Path) -> None:
    broker = private_redis(tmp_path / "redis")
    try:
        with (
            own_database(tmp_path, "redis") as database_url,
            running_platform(
                tmp_path, database_url, broker.url, NPULAB_DEVICES=str(DEVICES)
            ) as platform,
        ):
            pids = {name: pid_of(platform, name) for name in platform.processes}
            before = {name: tracebacks(log_lines(platform, name)) for name in platform.processes}
            # Each placed as its submission commits: the smoke runs get the devices.
            run_ids = [platform.submit(**FAST)["id"] for _ in range(DEVICES)]
            run_ids += [platform.submit(**ECHO_RUN)["id"] for _ in range(RUNS - DEVICES)]
            wait_until(
                lambda: any(platform.run(i)["status"] == "running" for i in run_ids),
                "a run to start",
                120,
            )
            states = sorted(platform.run(i)["status"] for i in run_ids)

            broker.kill()
            killed_at = time.monotonic()
            # Submitted with the broker gone: stored, and placed once it is back.
            run_ids += [platform.submit(**ECHO_RUN)["id"] for _ in range(DURING)]
            wait_until(
                lambda: all(
                    any(RECONNECTING["consumer"] in line for line in log_lines(platform, name))
                    for name in ("control", "worker-e2e-cpu")
                ),
                "both consumers to retry the broker",
                120,
            )
            broker.start()
            restarted_at = time.monotonic()

            for run_id in run_ids:
                platform.wait(run_id, timeout=240)
            recovered = time.monotonic() - restarted_at
            runs = run_once_each(platform, run_ids)
            requeued = sum("did not claim the run" in str(run) for run in runs)
            counts = [events_once(platform, run_id) for run_id in run_ids]
            lost, duplicated = sum(c[0] for c in counts), sum(c[1] for c in counts)

            assert {name: pid_of(platform, name) for name in platform.processes} == pids
            retries = {
                name: sum(
                    any(text in line for text in RECONNECTING.values())
                    for line in log_lines(platform, name)
                )
                for name in platform.processes
            }
            new_tracebacks = {
                name: tracebacks(log_lines(platform, name)) - before[name]
                for name in platform.processes
            }
            print(
                f"injected: kill -9 redis-server with runs {states}, {DURING} more submitted "
                f"while it was down ({restarted_at - killed_at:.1f} s); measured: all "
                f"{len(run_ids)} runs succeeded once {recovered:.1f} s after its restart "
                f"({requeued} requeued by the sweeper); reconnect lines {retries}; "
                f"tracebacks {new_tracebacks}; events lost {lost}, duplicated {duplicated}"
            )
            assert (lost, duplicated) == (0, 0)
            # One line per attempt, no traceback beside it: Celery's consumers log the
            # connection's loss once each, with its traceback, and that is all.
            assert all(count <= 1 for count in new_tracebacks.values()), platform.tail(80)
    finally:
        broker.stop()
