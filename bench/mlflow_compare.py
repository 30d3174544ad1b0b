"""npulab against MLflow, side by side on this machine: ingestion, reads, a training loop, storage.

Issue 15's comparison, run by the script itself: MLflow (``mlflow==3.17.2``) goes in a
virtualenv of its own, bench/.mlflow-venv/ (made on first use, then reused); each server
is started and stopped by the script, on a fresh database each time, and the two
alternate, A B A B (npulab, MLflow, npulab, MLflow ...), on SQLite and on PostgreSQL.
Before each start a CPU-idle gate waits until /proc/stat shows the CPUs idle enough; after
``--idle-timeout`` it goes on and the report says the gate was not met.

- npulab: harness/stack.py's stack (gunicorn 1 worker x 8 threads, the Celery
  control worker, a CPU host worker); SQLite with the embedded Redis as ``make run``, or
  PostgreSQL with Redis (bench/mlflow_npulab.py).
- MLflow: ``mlflow server --workers 1`` (uvicorn), its fastest setting, on a SQLite file
  or a PostgreSQL database of the same server (bench/mlflow_server.py).

On each start, with the same client (requests, one keep-alive session) both ways:

1. ingestion of ``--points`` points of one metric at 1,000 a request (MLflow's log-batch
   takes at most 1,000 metrics) and, npulab only, at 10,000, npulab's in the compact form
   its host worker sends (workers.contract.blocks): points/s, the request's time, and the
   server's CPU per request (its process tree, plus its database's
   backends on PostgreSQL, less what they spend idle);
2. storage per point on PostgreSQL: pg_total_relation_size of the metric tables (heap,
   indexes, TOAST) after VACUUM ANALYZE, over the points in them;
3. a whole read of the series: npulab's run metrics API in its row form, in each
   compact form it answers (``format=columns``, ``format=csv``) and a page of 25,000 at
   a time where it pages (``limit``); MLflow's ``metrics/get-history`` in one response
   and paged as its own client pages it (25,000 a page);
4. a downsampled read: npulab ``points=1000`` (1,000 buckets of first step, mean, min,
   max); MLflow's ``get-history-bulk-interval`` with ``max_results=1000`` (the sampled
   history its UI charts read: 1,000 of the points);
5. a training loop of ``--loop-points`` calls, each client in its own interpreter
   (bench/mlflow_loop.py): npulab's ``run.log`` in a training run on the stack's host
   worker, forwarded as on any host; MLflow's ``mlflow.log_metric(...,
   synchronous=False)`` from its virtualenv to its server. The cost per call, and when
   all points are readable through the API, from the loop's start and from its end.

The report goes to bench/results/mlflow_compare.json, the table to stdout and
bench/results/mlflow_compare.md. Usage, from the repository root:

    .venv/bin/python bench/mlflow_compare.py            # 2 rounds, both databases (~10 min)
    .venv/bin/python bench/mlflow_compare.py --quick    # 1 round of small series
    .venv/bin/python bench/mlflow_compare.py --databases sqlite --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform as host_platform
import signal
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "platform")]

from bench import mlflow_npulab, mlflow_server  # noqa: E402
from bench.common import BENCH_REDIS_DB, RESULTS, write_report  # noqa: E402
from bench.mlflow_common import idle_gate  # noqa: E402

DATABASES = ("sqlite", "postgresql")
LABELS = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
SIDES = (mlflow_npulab.NAME, mlflow_server.NAME)
BATCHES = (1_000, 10_000)
TARGETS = {
    "ingest_1000_ratio": 25.0,
    "server_ms_per_1000_request": 7.0,
    "small_of_large_batch_pct": 80.0,
    "whole_read_ratio": 50.0,
    "whole_read_100k_s": 0.1,
    "readable_after_end_s": 0.5,
    "bytes_per_point": 170.0,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 round of 20,000-point series")
    parser.add_argument(
        "--databases",
        default=",".join(DATABASES),
        help=f"comma-separated: {', '.join(DATABASES)} (default: both)",
    )
    parser.add_argument(
        "--sides",
        default=",".join(SIDES),
        help=f"comma-separated, to debug one: {', '.join(SIDES)} (default: both, alternating)",
    )
    parser.add_argument("--rounds", type=int, help="starts of each server per database (2)")
    parser.add_argument("--points", type=int, help="points per ingested series (100,000)")
    parser.add_argument("--loop-points", type=int, help="run.log / log_metric calls (100,000)")
    parser.add_argument("--reads", type=int, help="repetitions of each whole read (3)")
    parser.add_argument("--downsampled-reads", type=int, help="repetitions (10)")
    parser.add_argument("--buckets", type=int, default=1000, help="of a downsampled read")
    parser.add_argument(
        "--idle-busy-pct",
        type=float,
        default=30.0,
        help="the gate: at most this share of all CPUs busy, two 1 s samples in a row",
    )
    parser.add_argument("--idle-timeout", type=float, help="seconds the gate waits (60)")
    parser.add_argument(
        "--redis-db", type=int, default=BENCH_REDIS_DB, help="npulab's Redis db on PostgreSQL"
    )
    args = parser.parse_args(argv)
    quick = args.quick
    defaults = {
        "rounds": 1 if quick else 2,
        "points": 20_000 if quick else 100_000,
        "loop_points": 20_000 if quick else 100_000,
        "reads": 1 if quick else 3,
        "downsampled_reads": 3 if quick else 10,
        "idle_timeout": 5.0 if quick else 60.0,
    }
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.databases = [name.strip() for name in args.databases.split(",") if name.strip()]
    unknown = set(args.databases) - set(DATABASES)
    if unknown:
        parser.error(f"unknown database(s) {', '.join(sorted(unknown))}: {', '.join(DATABASES)}")
    args.sides = [name.strip() for name in args.sides.split(",") if name.strip()]
    if set(args.sides) - set(SIDES):
        parser.error(f"--sides: {', '.join(SIDES)}")
    if args.rounds < 1 or args.points < max(BATCHES) or args.loop_points < 1:
        parser.error(f"--rounds >= 1, --points >= {max(BATCHES):,} and --loop-points >= 1")
    return args


def say(what: str) -> None:
    print(f"  {datetime.now():%H:%M:%S} {what}", flush=True)


def starter(side: str, args: argparse.Namespace) -> Callable[[str], Any]:
    if side == mlflow_npulab.NAME:
        return lambda database: mlflow_npulab.started(database, args.redis_db)
    return mlflow_server.started


def one_start(side: str, database: str, args: argparse.Namespace, result: dict[str, Any]) -> None:
    """Start ``side`` on a fresh ``database``, take every measure into ``result``, stop it."""
    say("CPU-idle gate")
    result["gate"] = idle_gate(args.idle_busy_pct, args.idle_timeout)
    say(f"starting {side} on {database}")
    began = time.perf_counter()
    with (
        tempfile.TemporaryDirectory(prefix="npulab-bench-mlflow-loop-") as work,
        starter(side, args)(database) as server,
    ):
        result["startup_s"] = round(time.perf_counter() - began, 2)
        for batch in BATCHES:
            say(f"ingest at {batch:,} a request")
            result[f"ingest_{batch}"] = server.ingest(args.points, batch)
        result["storage"] = server.storage()
        say("whole reads")
        result["whole"] = server.read_whole(args.reads)
        say("downsampled reads")
        result["downsampled"] = server.read_downsampled(args.downsampled_reads, args.buckets)
        say("training loop")
        result["loop"] = server.loop(args.loop_points, Path(work))
    result["load_1m_after"] = round(os.getloadavg()[0], 2)


# -- the summary --------------------------------------------------------------------


def dig(value: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def median_of(starts: list[dict[str, Any]], path: str) -> float | None:
    values = [dig(start, path) for start in starts]
    values = [value for value in values if isinstance(value, int | float)]
    return round(statistics.median(values), 3) if values else None


# (label, path in one start's result, which way is better)
MEASURES = (
    ("ingest, 1,000 points a request (points/s)", "ingest_1000.points_per_s", "higher"),
    ("… time of a request, p50 (ms)", "ingest_1000.request_ms.p50", "lower"),
    ("… server CPU a request (ms)", "ingest_1000.server_cpu_per_request.total_ms", "lower"),
    ("ingest, 10,000 points a request (points/s)", "ingest_10000.points_per_s", "higher"),
    ("… server CPU a request (ms)", "ingest_10000.server_cpu_per_request.total_ms", "lower"),
    ("whole read, rows (ms)", "whole.rows.ms.p50", "lower"),
    ("whole read, columns (ms)", "whole.columns.ms.p50", "lower"),
    ("whole read, CSV (ms)", "whole.csv.ms.p50", "lower"),
    ("whole read, rows, 25,000 a page (ms)", "whole.rows_paged.ms.p50", "lower"),
    ("downsampled read (ms)", "downsampled.ms.p50", "lower"),
    ("loop, one logging call (µs)", "loop.per_call_us", "lower"),
    ("loop, all points readable after its start (s)", "loop.readable_after_start_s", "lower"),
    ("loop, all points readable after its end (s)", "loop.readable_after_end_s", "lower"),
    ("storage per point, PostgreSQL (B)", "storage.bytes_per_point", "lower"),
)
WHOLE_FORMS = tuple(path for _, path, _ in MEASURES if path.startswith("whole."))


def advantage(ours: float | None, theirs: float | None, better: str) -> float | None:
    """How many times better npulab is (above 1) or worse (below 1)."""
    if not ours or not theirs:
        return None
    return round(ours / theirs if better == "higher" else theirs / ours, 1)


def fastest_of(values: list[float | None]) -> float | None:
    measured = [value for value in values if value]
    return min(measured) if measured else None


def summarize(results: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    """Medians over the starts of each side, npulab's advantage, and the issue's targets."""
    summary: dict[str, Any] = {}
    for database, sides in results.items():
        rows = {}
        for _, path, better in MEASURES:
            values = {side: median_of(starts, path) for side, starts in sides.items()}
            ours, theirs = values.get(mlflow_npulab.NAME), values.get(mlflow_server.NAME)
            rows[path] = {**values, "advantage": advantage(ours, theirs, better)}
        ours = {path: row.get(mlflow_npulab.NAME) for path, row in rows.items()}
        small, large = ours["ingest_1000.points_per_s"], ours["ingest_10000.points_per_s"]
        fastest = fastest_of([ours[path] for path in WHOLE_FORMS])
        theirs_whole = fastest_of([rows[path].get(mlflow_server.NAME) for path in WHOLE_FORMS])
        summary[database] = {
            "measures": rows,
            "small_of_large_batch_pct": round(small / large * 100, 1) if small and large else None,
            "whole_read_fastest_ms": fastest,
            "whole_read_fastest_mlflow_ms": theirs_whole,
            "whole_read_fastest_advantage": advantage(fastest, theirs_whole, "lower"),
        }
    return summary


def targets(summary: dict[str, Any], points: int) -> list[tuple[str, Any, bool | None]]:
    """(what, the measured value, met) for each of the issue's targets, per database."""
    found = []
    for database, part in summary.items():
        rows = part["measures"]
        ours = mlflow_npulab.NAME
        whole_s = part["whole_read_fastest_ms"]
        checks = [
            (
                "ingest at 1,000 a request ≥ 25× MLflow",
                rows["ingest_1000.points_per_s"]["advantage"],
                TARGETS["ingest_1000_ratio"],
                "≥",
            ),
            (
                "server CPU a 1,000-point request ≤ 7 ms",
                rows["ingest_1000.server_cpu_per_request.total_ms"].get(ours),
                TARGETS["server_ms_per_1000_request"],
                "≤",
            ),
            (
                "1,000 a request ≥ 80 % of 10,000 a request (%)",
                part["small_of_large_batch_pct"],
                TARGETS["small_of_large_batch_pct"],
                "≥",
            ),
            (
                "whole read (fastest forms) ≥ 50× get-history",
                part["whole_read_fastest_advantage"],
                TARGETS["whole_read_ratio"],
                "≥",
            ),
            (
                "whole read of 100,000 points ≤ 0.1 s (s)",
                whole_s / 1000 if whole_s and points == 100_000 else None,
                TARGETS["whole_read_100k_s"],
                "≤",
            ),
            (
                "readable ≤ 0.5 s after the loop ends (s)",
                rows["loop.readable_after_end_s"].get(ours),
                TARGETS["readable_after_end_s"],
                "≤",
            ),
            (
                "storage ≤ 170 B a point (B)",
                rows["storage.bytes_per_point"].get(ours),
                TARGETS["bytes_per_point"],
                "≤",
            ),
        ]
        for what, value, bound, way in checks:
            if value is None:
                continue
            met = value >= bound if way == "≥" else value <= bound
            found.append((f"{LABELS[database]}: {what}", round(value, 3), met))
    return found


def number(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 100:
        return f"{value:.1f}"
    return f"{value:.3g}"


def markdown(report: dict[str, Any]) -> str:
    """The table of docs/benchmarks.md: medians over the starts, per database; the targets."""
    summary = report["summary"]
    databases = list(summary)
    head = "| measure | " + " | ".join(
        f"{LABELS[name]} npulab | {LABELS[name]} MLflow | ×" for name in databases
    )
    lines = [head + " |", "| --- |" + " ---: | ---: | ---: |" * len(databases)]
    for label, path, _ in MEASURES:
        cells = []
        for database in databases:
            row = summary[database]["measures"][path]
            cells += [
                number(row.get(mlflow_npulab.NAME)),
                number(row.get(mlflow_server.NAME)),
                f"{row['advantage']:g}×" if row["advantage"] else "-",
            ]
        if all(cell == "-" for cell in cells):
            continue
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "| target (issue 15) | measured | |", "| --- | ---: | --- |"]
    for what, value, met in targets(summary, report["settings"]["points"]):
        lines.append(f"| {what} | {number(value)} | {'met' if met else '**missed**'} |")
    gates = [
        start["gate"]
        for sides in report["results"].values()
        for starts in sides.values()
        for start in starts
        if "gate" in start
    ]
    errors = sum(
        "error" in start
        for sides in report["results"].values()
        for starts in sides.values()
        for start in starts
    )
    busy = sorted(gate["busy_pct"] for gate in gates)
    loads = sorted(gate["load_1m"] for gate in gates)
    lines += [
        "",
        f"CPU-idle gate met before {sum(gate['met'] for gate in gates)} of {len(gates)} "
        f"starts; CPUs busy at the starts {busy[0]} to {busy[-1]} %, load average "
        f"{loads[0]} to {loads[-1]} (1 min; {report['load_average_1m']['start']} at the "
        f"beginning, {report['load_average_1m']['end']} at the end).",
    ]
    if errors:
        lines.append(f"**{errors} start(s) failed**: see their `error` in the JSON.")
    return "\n".join(lines)


def machine() -> dict[str, Any]:
    memory = 0
    model = ""
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("MemTotal:"):
                memory = int(line.split()[1]) * 1024
    with open("/proc/cpuinfo") as handle:
        for line in handle:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "memory_gib": round(memory / 2**30, 1),
        "platform": host_platform.platform(),
        "python": host_platform.python_version(),
    }


def postgres_version() -> str | None:
    import psycopg

    from harness.services import POSTGRES

    try:
        with psycopg.connect(
            host=POSTGRES[0], port=POSTGRES[1], user="postgres", dbname="postgres"
        ) as connection:
            return connection.execute("SHOW server_version").fetchone()[0]
    except psycopg.Error:
        return None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # A timeout's SIGTERM unwinds like Ctrl-C: the servers stop, their databases go.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    mlflow_server.ensure_venv()
    report: dict[str, Any] = {
        "when": datetime.now().isoformat(timespec="seconds"),
        "machine": machine(),
        "postgresql": postgres_version() if "postgresql" in args.databases else None,
        "mlflow": mlflow_server.VERSION,
        "settings": vars(args),
        "targets": TARGETS,
        "load_average_1m": {"start": round(os.getloadavg()[0], 2)},
        "results": {},
    }
    for database in args.databases:
        sides: dict[str, list[dict[str, Any]]] = {side: [] for side in args.sides}
        report["results"][database] = sides
        for round_index in range(args.rounds):
            for side in args.sides:  # A B A B: the order never changes
                print(f"{database}, round {round_index + 1}: {side} ...", flush=True)
                result: dict[str, Any] = {}
                sides[side].append(result)
                try:
                    one_start(side, database, args, result)
                except Exception as exc:  # one failed start must not lose the others' numbers
                    traceback.print_exc()
                    result["error"] = f"{type(exc).__name__}: {str(exc)[-2000:]}"
                # What ran so far, should a later start hang past the caller's timeout.
                RESULTS.mkdir(exist_ok=True)
                (RESULTS / "mlflow_compare.partial.json").write_text(json.dumps(report, indent=2))
    report["load_average_1m"]["end"] = round(os.getloadavg()[0], 2)
    report["summary"] = summarize(report["results"])
    write_report("mlflow_compare", report)
    table = markdown(report)
    (RESULTS / "mlflow_compare.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
