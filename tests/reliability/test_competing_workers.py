"""Two workers after one device: never both leased, each run run once (issue 14, "The
reliability suite").

Three ways they meet: a second host worker started on the first's work directory (it
would take the first's live runs for orphans and kill them: it refuses to start),
placement passes of the control worker's threads racing for the same free device, and
two claims of one run attempt (a message delivered twice) arriving together.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, transaction
from rest_framework.test import APIClient

from harness.stack import HOST
from npulab.hosts.services import do_issue_host_token
from npulab.runs.models import DeviceLease, Run, RunAttempt
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import do_cancel_run, do_submit_run
from npulab.web import stack
from tests.conftest import register
from tests.factories import HostFactory
from tests.reliability.faults import private_redis
from tests.reliability.stacks import (
    ECHO_RUN,
    log_lines,
    own_database,
    run_once_each,
    running_platform,
    start_long_echo_run,
)
from tests.waiting import wait_until

PASSES = 8
ROUNDS = 5


def at_once(count: int, work: Callable[[int], Any]) -> list[Any]:
    """``work(i)`` in ``count`` threads released together; their results or exceptions."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def go(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = work(index)
        except Exception as exc:
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=go, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results


@pytest.mark.django_db(transaction=True)
def test_racing_placement_passes_never_lease_a_device_twice(owner) -> None:
    host = register(HostFactory(name="npu-01"), "npu", 2)
    # Committed together: a submission alone in the queue would be placed as it commits.
    with transaction.atomic():
        runs = [
            do_submit_run(owner, {"kind": "smoke", "device_type": "npu"}) for _ in range(ROUNDS * 2)
        ]
    dispatched: list[int] = []
    for _ in range(ROUNDS):
        results = at_once(PASSES, lambda _: place_queued_runs())
        errors = [r for r in results if isinstance(r, Exception)]
        assert errors == []
        placed = [run_id for result in results for run_id in result]
        leases = list(DeviceLease.objects.values_list("device_index", "run_id"))
        # Two devices, two runs: whichever passes won, none placed a run twice.
        assert len(placed) == len(set(placed)) == 2, results
        assert sorted(index for index, _ in leases) == [0, 1]
        assert sorted(run_id for _, run_id in leases) == sorted(placed)
        dispatched += placed
        for run_id in placed:
            do_cancel_run(run_id, owner)
    assert sorted(dispatched) == sorted(run.pk for run in runs)
    assert not DeviceLease.objects.filter(host=host).exists()
    print(
        f"injected: {PASSES} placement passes at once, {ROUNDS} times, for 2 devices; "
        f"measured: {len(dispatched)} runs dispatched once each, never a device leased twice"
    )


@pytest.mark.django_db(transaction=True)
def test_two_claims_of_one_attempt_start_it_once(owner) -> None:
    # A device a round: the claimed runs keep theirs.
    host = register(HostFactory(name="npu-01"), "npu", ROUNDS)
    token = do_issue_host_token(host)
    for _ in range(ROUNDS):
        run = do_submit_run(owner, {"kind": "smoke", "device_type": "npu"})
        # Alone in the queue, it was placed as its submission committed.
        assert Run.objects.get(pk=run.pk).status == Run.Status.DISPATCHED

        def claim(_: int, run_id: int = run.pk) -> int:
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
            url = f"/api/v1/agent/runs/{run_id}/claim/"
            return client.post(url, {"attempt": 1}, format="json").status_code

        assert sorted(at_once(2, claim)) == [200, 409]
        assert RunAttempt.objects.filter(run=run).count() == 1
        assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING
    print(f"injected: two claims of one attempt at once, {ROUNDS} times; measured: one each")


@pytest.mark.e2e
def test_a_second_worker_on_the_same_work_directory_leaves_the_first_alone(
    tmp_path: Path,
) -> None:
    broker = private_redis(tmp_path / "redis")
    try:
        with (
            own_database(tmp_path, "workers") as database_url,
            running_platform(tmp_path, database_url, broker.url) as platform,
        ):
            run_id, child = start_long_echo_run(platform)
            first = platform.processes[f"worker-{HOST}"]
            work = platform.run_dir(0).parents[2]
            started = time.monotonic()
            second = platform.start(
                "worker-second",
                stack.host_worker_argv(
                    platform.url, platform.var_dir / f"{HOST}.token", broker.url, work
                ),
            )
            wait_until(lambda: second.returncode is not None, "the second worker to exit", 120)
            refused = time.monotonic() - started
            said = [line for line in log_lines(platform, "worker-second") if "ERROR" in line]
            assert second.returncode == 1, platform.tail()
            assert f"another host worker (pid {first.process.pid}) is running" in said[0]
            # The first worker and its run go on as if nothing happened.
            os.kill(child, 0)
            assert first.returncode is None
            assert platform.run(run_id)["status"] == "running"
            assert platform.api("POST", f"runs/{run_id}/cancel/").status_code == 200
            assert platform.wait(run_id)["status"] == "cancelled"
            after = platform.submit(**ECHO_RUN)["id"]
            platform.wait(after)
            run_once_each(platform, [after])
            leases = platform.api("GET", f"hosts/{HOST}/").json()["busy_devices"]
            print(
                f"injected: a second host worker on the first's work directory; measured: "
                f"it refused in {refused:.1f} s ({said[0].split(': ', 1)[-1]!r}); the first's "
                f"run kept running; the next run ran once; devices leased after: {leases}"
            )
            assert leases == 0
    finally:
        broker.stop()
