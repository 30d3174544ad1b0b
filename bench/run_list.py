"""The run list of a busy project: a page of 50 runs, each row with its result at a glance.

Issue 34's run list shows each run's headline in its Result column (a training run's first
metric, its steps and a sparkline; a failed run's diagnosis), and the page refreshes itself
every 5 s while it is open. This measures what one page costs the server: 40 finished
training runs with 4 series of 10,000 points each, 10 failed runs with a diagnosis, the
list and its htmx refresh read through Django's whole handler in this process (session
login, middleware, templates; no socket), median of ``--repeat`` after a warm-up, with the
number of SQL queries of one request.

    .venv/bin/python bench/run_list.py               # PostgreSQL when here
    .venv/bin/python bench/run_list.py --embedded    # SQLite
"""

from __future__ import annotations

import argparse
import os
import platform as host_platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# Last: another commit's code, when given on PYTHONPATH, comes first.
sys.path += [str(REPO), str(REPO / "platform")]

BENCH_DATABASE = "npulab_bench_run_list"
TRAINED, FAILED = 40, 10
SERIES = ("loss", "lr", "throughput", "grad_norm")
POINTS = 10_000
DIAGNOSIS = {
    "category": "oom",
    "code": "EL0004",
    "blame": "user-code",
    "line": "RuntimeError: NPU out of memory. Tried to allocate 22.00 MiB",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--embedded", action="store_true", help="SQLite instead of PostgreSQL")
    args = parser.parse_args()
    from bench.common import migrated_django

    # The runs are made finished, never placed.
    with migrated_django(args.embedded, BENCH_DATABASE):
        report = measure(args.repeat)
    print(f"{report['machine']}; load average {report['load']}")
    for name in ("list", "refresh"):
        row = report[name]
        print(f"{name:8s} {row['ms']:8.1f} ms median  {row['queries']:4d} queries  {row['kb']} kB")
    return 0


def make_runs() -> Any:
    from datetime import timedelta

    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from bench.series_reads import settle, write_series
    from npulab.runs.models import Run
    from npulab.runs.services import do_submit_run

    user = get_user_model().objects.create_user("bench")
    now = timezone.now()
    spec = {"kind": "training", "entry": "builtin:cnn", "device_type": "cpu"}
    for index in range(TRAINED + FAILED):
        failed = index >= TRAINED
        run = do_submit_run(user, {**spec, "wait_for_host": True, "max_steps": POINTS})
        Run.objects.filter(pk=run.pk).update(
            status=Run.Status.FAILED if failed else Run.Status.SUCCEEDED,
            started_at=now - timedelta(hours=2),
            finished_at=now - timedelta(hours=1),
            diagnosis=DIAGNOSIS if failed else {},
            exit_reason="aclrtMemcpy failed, error code 507899" if failed else "",
        )
        for key in SERIES:
            write_series(run.pk, key, POINTS if not failed else POINTS // 10)
    settle()
    return user


def measure(repeat: int) -> dict[str, Any]:
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections, connection
    from django.test import Client

    # One connection for the whole measurement, as a server process keeps it, so that
    # every query of a request is counted.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    user = make_runs()
    client = Client()
    client.force_login(user)
    found: dict[str, Any] = {}
    for name, headers in (("list", {}), ("refresh", {"HX-Request": "true"})):

        def get(headers: dict[str, str] = headers) -> bytes:
            response = client.get("/runs/", headers=headers)
            assert response.status_code == 200, response.content[:300]
            return response.content

        queries: list[str] = []

        def counted(execute: Any, sql: str, *args: Any, seen: list[str] = queries) -> Any:
            seen.append(sql)
            return execute(sql, *args)

        with connection.execute_wrapper(counted):
            body = get()
        assert body.count(b"<tr data-run=") == 50, "a page of 50 runs"
        get()  # warm-up
        samples = []
        for _ in range(repeat):
            begun = time.perf_counter()
            get()
            samples.append((time.perf_counter() - begun) * 1000)
        found[name] = {
            "ms": statistics.median(samples),
            "queries": len(queries),
            "kb": round(len(body) / 1024),
        }
    found["machine"] = (
        f"{host_platform.machine()}, {os.cpu_count()} cores, "
        f"Python {host_platform.python_version()}, {connection.vendor}"
    )
    found["load"] = " ".join(f"{load:.1f}" for load in os.getloadavg())
    return found


if __name__ == "__main__":
    sys.exit(main())
