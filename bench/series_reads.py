"""Reads of long series: downsampled at every chart resolution, and whole in each form.

For each size in ``--points`` (default 100,000 and 1,000,000; add 10,000,000 for the
issue's largest, a minute to write) a run's series is written straight into a fresh
database by the store's own chunk and rollup writers, a million points at a time, as
ingestion would have left them (no HTTP, no events: this measures reads). Then, the
median wall time of ``--repeat`` calls after a warm-up and their mean CPU time (this
process's, SQLite's included, plus its PostgreSQL backend's when the server runs here):

- downsampled reads at 100 … 5,000 buckets, by the store call in columns (``reads.read``,
  what the server's callers use; a commit without it shows none), in Python rows
  (``reads.series``), and by an API request (``GET /api/v1/runs/{id}/metrics/?key=…&points=…``),
  all of them taking turns, a call each a round;
- whole reads, series up to 1,000,000 points, through the API in each form: rows (the
  default JSON), ``format=columns``, ``format=csv``; above 100,000 points they stream.

Requests go through Django's whole handler (middleware, session login, DRF) in this
process, with no socket: what a server adds is its own (bench/training.py measures that).

``--in-process`` measures only what issue 31's "reads flat in resolution" weighs: the
downsampled API request at each bucket count, ``--requests`` of each (default 200) after
``--warmup`` (20), the counts taking turns a request each (``--one-after-the-other``: each
count's requests together, where a request follows one of its own size), every request
timed alone on this process's CPU clock (``time.process_time``: the server's own work,
SQLite's included, whatever else the machine runs), as a user's first in a while (the rate
limit's record cleared before it); the median and mean per request, and each count's ratio
to 320 buckets'.

    .venv/bin/python bench/series_reads.py                          # PostgreSQL when here
    .venv/bin/python bench/series_reads.py --points 1000000,10000000
    .venv/bin/python bench/series_reads.py --embedded               # SQLite
    .venv/bin/python bench/series_reads.py --embedded --points 1000000 --in-process
    PYTHONPATH=../other:../other/platform .venv/bin/python bench/series_reads.py  # its code
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform as host_platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

REPO = Path(__file__).resolve().parent.parent
# Last: another commit's code, when given on PYTHONPATH, comes first.
sys.path += [str(REPO), str(REPO / "platform")]

BUCKETS = (100, 320, 1000, 2500, 5000)
# The bucket count the others are compared with in ``--in-process`` (issue 31: 2,500 against
# 320 buckets).
SMALL_READ = 320
WHOLE_UP_TO = 1_000_000
FORMS = ("json", "columns", "csv")
BENCH_DATABASE = "npulab_bench_series"
KEY = "loss"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", default="100000,1000000", help="comma-separated sizes")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--embedded", action="store_true", help="SQLite instead of PostgreSQL")
    parser.add_argument("--database", default=BENCH_DATABASE, help="PostgreSQL's, made anew")
    parser.add_argument(
        "--in-process", action="store_true", help="only downsampled requests, on the CPU clock"
    )
    parser.add_argument("--requests", type=int, default=200, help="with --in-process")
    parser.add_argument("--warmup", type=int, default=20, help="with --in-process")
    parser.add_argument(
        "--one-after-the-other",
        action="store_true",
        help="with --in-process: each bucket count's requests together, not in turns",
    )
    args = parser.parse_args()
    sizes = [int(size) for size in args.points.split(",")]

    from bench.common import migrated_django

    # The run that owns the series is never placed.
    with migrated_django(args.embedded, args.database):
        if args.in_process:
            report = measure(
                sizes,
                lambda client, run_id, points: in_process(
                    client, run_id, args.requests, args.warmup, not args.one_after_the_other
                ),
            )
        else:
            report = measure(
                sizes, lambda client, run_id, points: reads(client, run_id, points, args.repeat)
            )
    (print_in_process if args.in_process else print_report)(report)
    return 0


def measure(
    sizes: list[int], measured: Callable[[Any, int, int], dict[str, Any]]
) -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from npulab.runs.services import do_submit_run

    user = get_user_model().objects.create_user("bench")
    client = Client()
    client.force_login(user)
    found: dict[str, Any] = {"series": []}
    for points in sizes:
        run = do_submit_run(user, {"kind": "smoke", "device_type": "cpu", "wait_for_host": True})
        started = time.perf_counter()
        write(run.pk, points)
        entry = {"points": points, "write_s": time.perf_counter() - started}
        found["series"].append({**entry, **measured(client, run.pk, points)})
    if connection.vendor == "postgresql":
        # The store's tables with their indexes and TOAST (chunks and rollups; the series rows
        # and the telemetry table add a few kB): what a point costs on disk.
        with connection.cursor() as cursor:
            sizes_sql = " + ".join(["pg_total_relation_size(%s)"] * len(store_tables()))
            cursor.execute(f"SELECT {sizes_sql}", store_tables())
            found["bytes_per_point"] = cursor.fetchone()[0] / sum(sizes)
    found["machine"] = (
        f"{host_platform.machine()}, {os.cpu_count()} cores, "
        f"Python {host_platform.python_version()}, {connection.vendor}"
    )
    found["load"] = " ".join(f"{load:.1f}" for load in os.getloadavg())
    return found


def reads(client: Any, run_id: int, points: int, repeat: int) -> dict[str, Any]:
    from npulab.series import reads as store
    from npulab.series.owners import Owner
    from npulab.series.reads import series

    url = f"/api/v1/runs/{run_id}/metrics/"
    owner = Owner.of_run(run_id)

    def request(**params: Any) -> int:
        response = client.get(url, {"key": KEY, **params})
        assert response.status_code == 200, response.content[:300]
        content = response.streaming_content if response.streaming else [response.content]
        return sum(len(chunk) for chunk in content)

    found: dict[str, Any] = {"downsampled": {}}
    calls: dict[tuple[str, int], Callable[[], Any]] = {}
    for buckets in BUCKETS:
        if hasattr(store, "read"):
            calls["columns", buckets] = lambda b=buckets: store.read(owner, KEY, b)
        calls["rows", buckets] = lambda b=buckets: series(owner, KEY, b)
        calls["api", buckets] = lambda b=buckets: request(points=b)
    timings = timed_in_turns(calls, repeat)
    for buckets in BUCKETS:
        columns = timings.get(("columns", buckets))
        rows, api = timings["rows", buckets], timings["api", buckets]
        found["downsampled"][buckets] = {
            "columns_ms": columns and columns.wall_ms,
            "columns_cpu_ms": columns and columns.cpu_ms,
            "store_ms": rows.wall_ms,
            "store_cpu_ms": rows.cpu_ms,
            "api_ms": api.wall_ms,
            "api_cpu_ms": api.cpu_ms,
            "returned": len(series(owner, KEY, buckets)["points"]),
        }
    if points <= WHOLE_UP_TO:
        found["whole"] = {}
        for form in FORMS:
            api = timed(lambda f=form: request(format=f), repeat)
            found["whole"][form] = {
                "api_ms": api.wall_ms,
                "api_cpu_ms": api.cpu_ms,
                "bytes": request(format=form),
            }
    return found


def in_process(
    client: Any, run_id: int, requests: int, warmup: int, in_turns: bool
) -> dict[str, Any]:
    """Each downsampled request's CPU time in this process: ``requests`` of each bucket count
    after ``warmup`` of each, the counts taking turns a request each (``in_turns``) or each
    count's requests one after the other."""
    from django.core.cache import cache

    url = f"/api/v1/runs/{run_id}/metrics/"

    def spent(buckets: int) -> float:
        # The rate limit's record of this user's requests (the one thing in the cache): a
        # chart's reader has made a few, not the thousand made here, whose record a request
        # unpickles and stores again, and which would reach the limit.
        cache.clear()
        begun = time.process_time()
        response = client.get(url, {"key": KEY, "points": buckets})
        cpu = time.process_time() - begun
        assert response.status_code == 200, response.content[:300]
        return cpu * 1000

    samples: dict[int, list[float]] = {buckets: [] for buckets in BUCKETS}
    if in_turns:
        for round_ in range(warmup + requests):
            for buckets, kept in samples.items():
                cpu = spent(buckets)
                if round_ >= warmup:
                    kept.append(cpu)
    else:
        for buckets, kept in samples.items():
            for _ in range(warmup):
                spent(buckets)
            kept += [spent(buckets) for _ in range(requests)]
    return {
        "in_process": {
            buckets: {"median_ms": statistics.median(kept), "mean_ms": statistics.fmean(kept)}
            for buckets, kept in samples.items()
        },
        "in_turns": in_turns,
    }


# Points a slice of the fixture is written in: whole 10,000-step blocks, a few hundred MB.
_SLICE = 1_000_000


def write(run_id: int, points: int) -> None:
    """``points`` points of one series, written as ingestion would have left them."""
    write_series(run_id, KEY, points)
    settle()


def write_series(run_id: int, key: str, points: int) -> None:
    """``points`` points of series ``key``, written by the store's own chunk and rollup
    writers a million at a time (the events endpoint would take minutes for ten million)."""
    import numpy as np

    from npulab.series import chunks, rollups
    from npulab.series.models import MetricSeries

    found = MetricSeries.objects.create(run_id=run_id, key=key, points=points)
    steps = np.arange(points, dtype=np.int64)
    values = 2.0 + np.sin(steps / 5000.0) + (steps % 977) / 977.0
    values[steps % 100_003 == 0] = 50.0  # spikes a chart must keep
    stored = chunks.Points(steps, values, 1.7e9 + steps * 0.01)
    for start in range(0, points, _SLICE):
        part = stored.where(slice(start, start + _SLICE))
        chunks.insert(chunks.write(found.pk, 1, part))
        # Every block of a slice is new: it starts after the slice before it.
        rollups.store(rollups.aggregate(found.pk, part), {found.pk: start - 1 if start else None})
    MetricSeries.objects.filter(pk=found.pk).update(last_step=points - 1)


def settle() -> None:
    """On PostgreSQL, the tables as autovacuum leaves an insert-only table: visibility map
    set, statistics in."""
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            for table in store_tables():
                cursor.execute(f"VACUUM ANALYZE {connection.ops.quote_name(table)}")


def store_tables() -> list[str]:
    """The metric store's tables, whichever commit's layout is measured."""
    from django.apps import apps

    return [model._meta.db_table for model in apps.get_app_config("series").get_models()]


class Timing(NamedTuple):
    wall_ms: float
    cpu_ms: float


def timed(call: Callable[[], Any], repeat: int) -> Timing:
    """The median wall time of ``repeat`` calls after a warm-up, and their mean CPU time:
    this process's (SQLite's included), plus its PostgreSQL backend's where that runs here.
    On a shared machine the wall time follows the load; the CPU time much less."""
    call()  # warm-up
    samples = []
    cpu = backend_cpu_s()
    for _ in range(repeat):
        begun = time.perf_counter()
        call()
        samples.append((time.perf_counter() - begun) * 1000)
    cpu = backend_cpu_s() - cpu
    return Timing(statistics.median(samples), cpu * 1000 / repeat)


def timed_in_turns(
    calls: dict[tuple[str, int], Callable[[], Any]], repeat: int
) -> dict[tuple[str, int], Timing]:
    """``timed`` of each call, the calls taking turns ``repeat`` times after a warm-up each:
    a spell of load on a shared machine then weighs on every call alike, where timed one
    after the other the calls of a spell looked dearer than the rest."""
    for call in calls.values():
        call()
    walls: dict[tuple[str, int], list[float]] = {name: [] for name in calls}
    cpus = dict.fromkeys(calls, 0.0)
    for _ in range(repeat):
        for name, call in calls.items():
            cpu, begun = backend_cpu_s(), time.perf_counter()
            call()
            walls[name].append((time.perf_counter() - begun) * 1000)
            cpus[name] += backend_cpu_s() - cpu
    return {
        name: Timing(statistics.median(walls[name]), cpus[name] * 1000 / repeat) for name in calls
    }


def backend_cpu_s() -> float:
    """CPU seconds of this process and of its database connection's PostgreSQL backend (from
    /proc, where the server runs on this machine)."""
    from django.db import connection

    seconds = time.process_time()
    if connection.vendor == "postgresql":
        connection.ensure_connection()
        stat = Path(f"/proc/{connection.connection.info.backend_pid}/stat")
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            seconds += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return seconds


def print_report(report: dict[str, Any]) -> None:
    print(f"{report['machine']}; load average {report['load']}")
    if "bytes_per_point" in report:
        print(f"{report['bytes_per_point']:.0f} B per point (points, rollups, their indexes)")
    for entry in report["series"]:
        print(f"\n{entry['points']:,} points, written in {entry['write_s']:.1f} s\n")
        print(
            "| buckets asked | returned | store call, columns: wall, CPU "
            "| store call, rows: wall, CPU | API request: wall, CPU |"
        )
        print("| ---: | ---: | ---: | ---: | ---: |")
        for buckets, read in entry["downsampled"].items():
            columns = "-"
            if read["columns_ms"] is not None:
                columns = f"{read['columns_ms']:.2f} ms, {read['columns_cpu_ms']:.2f} ms"
            print(
                f"| {buckets:,} | {read['returned']:,} | {columns} "
                f"| {read['store_ms']:.2f} ms, {read['store_cpu_ms']:.2f} ms "
                f"| {read['api_ms']:.2f} ms, {read['api_cpu_ms']:.2f} ms |"
            )
        if "whole" in entry:
            print("\n| whole read | body | API request: wall, CPU |")
            print("| --- | ---: | ---: |")
            for form, read in entry["whole"].items():
                print(
                    f"| {form} | {read['bytes'] / 1e6:.1f} MB "
                    f"| {read['api_ms']:.1f} ms, {read['api_cpu_ms']:.1f} ms |"
                )


def print_in_process(report: dict[str, Any]) -> None:
    print(f"{report['machine']}; load average {report['load']}")
    for entry in report["series"]:
        found = entry["in_process"]
        small = found[SMALL_READ]
        order = "in turns" if entry["in_turns"] else "one count after the other"
        print(f"\n{entry['points']:,} points, downsampled API request, CPU in process, {order}\n")
        print(f"| buckets asked | median | mean | ratio to {SMALL_READ} (median, mean) |")
        print("| ---: | ---: | ---: | ---: |")
        for buckets, read in found.items():
            print(
                f"| {buckets:,} | {read['median_ms']:.2f} ms | {read['mean_ms']:.2f} ms "
                f"| {read['median_ms'] / small['median_ms']:.2f}×, "
                f"{read['mean_ms'] / small['mean_ms']:.2f}× |"
            )


if __name__ == "__main__":
    sys.exit(main())
