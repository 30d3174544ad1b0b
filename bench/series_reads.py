"""Downsampled reads of one long series at every chart resolution, straight from the store.

A host device's series of ``--points`` points (default 1,000,000; 10,000,000
takes a few minutes to write) is written through ``npulab.series.ingest``
into a fresh database, then ``npulab.series.reads.series`` is timed for
bucket counts from 100 to 5,000 (median of ``--repeat``, after a warm-up).
No web server: this is the store's own cost, which the rollup levels decide.

To compare with another commit, run this same script with that commit's
code first on the path: ``git worktree add /tmp/base <rev>``, then
``PYTHONPATH=/tmp/base:/tmp/base/platform .venv/bin/python bench/series_reads.py``.

    .venv/bin/python bench/series_reads.py                   # PostgreSQL when here
    .venv/bin/python bench/series_reads.py --embedded        # SQLite
"""

from __future__ import annotations

import argparse
import os
import platform as host_platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# Last: another commit's code, when given on PYTHONPATH, comes first.
sys.path += [str(REPO), str(REPO / "platform")]

BUCKETS = (100, 320, 1000, 2500, 5000)
BENCH_DATABASE = "npulab_bench_series"
BATCH = 100_000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--embedded", action="store_true", help="SQLite instead of PostgreSQL")
    args = parser.parse_args()

    drop = None
    if args.embedded:
        database_url = f"sqlite:///{tempfile.mkdtemp(prefix='npulab-bench-series-')}/db.sqlite3"
    else:
        from tests.e2e.platform import create_postgres_database
        from tests.services import detect

        services = detect()
        if services.database_url is None:
            raise SystemExit("no PostgreSQL here: use --embedded")
        database_url, drop = create_postgres_database(services.database_url, BENCH_DATABASE)
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("NPULAB_SECRET_KEY", "bench-only")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "npulab.settings")
    import django

    django.setup()
    from django.core.management import call_command

    try:
        call_command("migrate", verbosity=0)
        report = measure(args)
    finally:
        from django.db import connection

        connection.close()
        if drop is not None:
            drop()
    print_report(report)
    return 0


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import npulab.series.rollups as rollups
    from npulab.hosts.models import Host
    from npulab.series.ingest import insert_points
    from npulab.series.owners import Owner
    from npulab.series.reads import series

    host = Host.objects.create(name="bench-series")
    owner = Owner.of_host(host.pk, 0)
    started = time.perf_counter()
    for first in range(0, args.points, BATCH):
        steps = range(first, min(first + BATCH, args.points))
        insert_points(owner, {"temperature": [(s, 40.0 + (s % 977) / 97.0, 0.0) for s in steps]})
    written_s = time.perf_counter() - started
    reads: dict[int, dict[str, float]] = {}
    for buckets in BUCKETS:
        series(owner, "temperature", buckets)  # warm-up
        samples = []
        for _ in range(args.repeat):
            begun = time.perf_counter()
            body = series(owner, "temperature", buckets)
            samples.append((time.perf_counter() - begun) * 1000)
        reads[buckets] = {
            "median_ms": round(statistics.median(samples), 1),
            "max_ms": round(max(samples), 1),
            "returned": len(body["points"]),
        }
    return {
        "machine": f"{host_platform.machine()}, {os.cpu_count()} cores, "
        f"Python {host_platform.python_version()}",
        "code": rollups.__file__,
        "rollup_sizes": list(rollups.SIZES),
        "points": args.points,
        "write_s": round(written_s, 1),
        "reads": reads,
    }


def print_report(report: dict[str, Any]) -> None:
    print(f"{report['machine']}; code {report['code']}; rollups {report['rollup_sizes']}")
    print(f"{report['points']:,} points written in {report['write_s']} s\n")
    print("| buckets asked | returned | median | max |")
    print("| ---: | ---: | ---: | ---: |")
    for buckets, read in report["reads"].items():
        print(
            f"| {buckets:,} | {read['returned']:,} | {read['median_ms']} ms | {read['max_ms']} ms |"
        )


if __name__ == "__main__":
    sys.exit(main())
