"""The npulab side of bench/mlflow_compare.py: a real stack and the measures on it.

The stack is harness/stack.py's (gunicorn 1 worker x 8 threads, the Celery control
worker, a CPU host worker), on a fresh database each start. Ingestion comes from this
process as a host agent (one keep-alive session, the forwarder's request body); reads go
through the user API; the training loop is a real training run on the stack's host
worker, its points forwarded from events.jsonl as on any host.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.mlflow_common import (
    KEY,
    Body,
    ServerCpu,
    loss_values,
    post_all,
    timed_reads,
    wait_for,
)
from bench.training import FakeHost
from harness.services import POSTGRES, REDIS, Services
from harness.stack import HOST, launched_platform
from workers.contract.blocks import BLOCKS
from workers.host.packing import pack

NAME = "npulab"
DATABASE = "npulab_bench_mlflow_npulab"
FAKE_HOST = "bench-agent"
LOOP = Path(__file__).resolve().parent / "mlflow_loop.py"
# Where the loop script writes its times: its working directory, the run directory.
LOOP_TIMES = "loop-times.json"
# Compact forms of a whole read another change may add beside the row form: measured when
# the server answers them in a shape of their own (an older server ignores the parameter).
COMPACT_FORMATS = ("columns", "csv")
# A paged read's page: what MLflow's client asks get-history for (bench/mlflow_server.py).
PAGE = 25_000


def services_for(database: str, redis_db: int) -> Services:
    """SQLite and the embedded Redis (``make run``), or PostgreSQL and Redis db ``redis_db``."""
    if database == "sqlite":
        return Services("", "SQLite", None, "embedded Redis")
    return Services(
        f"postgres://postgres@{POSTGRES[0]}:{POSTGRES[1]}/postgres",
        f"PostgreSQL at {POSTGRES[0]}:{POSTGRES[1]}",
        f"redis://{REDIS[0]}:{REDIS[1]}/{redis_db}",
        f"Redis at {REDIS[0]}:{REDIS[1]} (db {redis_db})",
    )


class Npulab:
    """One started npulab stack."""

    name = NAME

    def __init__(self, platform: Any, database: str) -> None:
        self.platform = platform
        self.database = database
        url = platform.env["DATABASE_URL"]
        self.dsn = url if url.startswith("postgres") else None
        self.agent = FakeHost(platform.url, platform.manage("host_token", FAKE_HOST))
        self.agent.register()
        self.agent.start_heartbeats()
        self.metrics_url = ""
        self.points = 0

    def cpu(self) -> ServerCpu:
        return ServerCpu(self.platform.processes["web"].process.pid, DATABASE, self.dsn)

    def ingest(self, points: int, per_request: int) -> dict[str, Any]:
        """``points`` of one metric of a new run, ``per_request`` events a request."""
        run = self.platform.submit(
            kind="training",
            entry="builtin:cnn",
            host=FAKE_HOST,
            name=f"bench: {points:,} points at {per_request:,} a request",
            max_steps=points,
        )
        run = self.platform.wait(run["id"], {"dispatched"}, timeout=60)
        run_id, attempt = run["id"], run["attempt"]
        self.agent.post(f"runs/{run_id}/claim/", {"attempt": attempt})
        self.agent.running.append(run_id)
        bodies, end = event_bodies(attempt, points, per_request)
        url = f"{self.platform.url}/api/v1/agent/runs/{run_id}/events/"
        result = post_all(self.agent.session, url, bodies, self.cpu())
        finish_run(self.agent, url, run_id, attempt, end)
        self.platform.wait(run_id, {"succeeded"}, timeout=60)
        self.metrics_url = f"{self.platform.url}/api/v1/runs/{run_id}/metrics/"
        self.points = points
        result["points_per_s"] = round(points / result.pop("_elapsed"))
        return result

    def storage(self) -> dict[str, Any] | None:
        """Bytes per point of the metric tables on PostgreSQL, after VACUUM ANALYZE."""
        if self.dsn is None:
            return None
        tables = ("series_metricchunk", "series_metricrollupsegment", "series_metricseries")
        count = "SELECT COALESCE(SUM(points), 0) FROM series_metricchunk"
        return table_bytes(self.dsn, tables, count)

    def read_whole(self, repeat: int) -> dict[str, Any]:
        """The row form, and each compact form this server answers."""
        session = self.platform.session

        def rows() -> tuple[int, int]:
            response = session.get(self.metrics_url, params={"key": KEY}, timeout=300)
            response.raise_for_status()
            return len(response.json()["points"]), len(response.content)

        reads = {"rows": timed_reads(rows, repeat)}
        for form in COMPACT_FORMATS:
            probe = session.get(self.metrics_url, params={"key": KEY, "format": form}, timeout=300)
            if probe.status_code != 200 or compact_points(probe) is None:
                reads[form] = {"supported": False}
                continue

            def compact(form: str = form) -> tuple[int, int]:
                params = {"key": KEY, "format": form}
                response = session.get(self.metrics_url, params=params, timeout=300)
                response.raise_for_status()
                return compact_points(response) or 0, len(response.content)

            reads[form] = timed_reads(compact, repeat)
        reads["rows_paged"] = self.paged_read(repeat)
        return reads

    def paged_read(self, repeat: int) -> dict[str, Any]:
        """The row form a page at a time, MLflow's client's page size, where pages exist."""
        session = self.platform.session
        first = {"key": KEY, "limit": PAGE}
        probe = session.get(self.metrics_url, params=first, timeout=300)
        if probe.status_code != 200 or "next" not in probe.json():
            return {"supported": False}

        def pages() -> tuple[int, int]:
            points = size = 0
            response = session.get(self.metrics_url, params=first, timeout=300)
            while True:
                response.raise_for_status()
                body = response.json()
                points += len(body["points"])
                size += len(response.content)
                if not body["next"]:
                    return points, size
                response = session.get(body["next"], timeout=300)

        return timed_reads(pages, repeat)

    def read_downsampled(self, repeat: int, buckets: int) -> dict[str, Any]:
        session = self.platform.session

        def read() -> tuple[int, int]:
            params = {"key": KEY, "points": buckets}
            response = session.get(self.metrics_url, params=params, timeout=60)
            response.raise_for_status()
            return len(response.json()["points"]), len(response.content)

        return timed_reads(read, repeat)

    def loop(self, points: int, work: Path) -> dict[str, Any]:
        """A training run whose script logs ``points`` steps; when all are readable.

        The script writes its times into its run directory: a run executes as another user
        in a sandbox where only that directory is its own, so ``work`` is out of its reach.
        """
        run = self.platform.submit(
            kind="training",
            entry=str(LOOP),
            args=["npulab", LOOP_TIMES, str(points)],
            host=HOST,
            name=f"bench: a loop of {points:,} run.log calls",
            max_steps=points,
        )
        summary_url = f"{self.platform.url}/api/v1/runs/{run['id']}/metrics/"
        session = self.platform.session

        def readable() -> bool:
            found = session.get(summary_url, timeout=30).json()["metrics"]
            return any(item["key"] == KEY and item["points"] >= points for item in found)

        ready = wait_for(readable, 300, 0.02, f"{points:,} points of run {run['id']}")
        final = self.platform.wait(run["id"], timeout=120)
        if final["status"] != "succeeded":
            raise RuntimeError(f"loop run {run['id']} {final['status']}: {final['exit_reason']}")
        times = self.platform.run_dir(run["id"]) / LOOP_TIMES
        return loop_report(json.loads(times.read_text()), ready)

    def close(self) -> None:
        self.agent.stop()


def loop_report(times: dict[str, float], ready: float) -> dict[str, Any]:
    """What a loop's own times (mlflow_loop.py's file) and its readable moment say."""
    loop_s = times["end"] - times["start"]
    report = {
        "calls": times["calls"],
        "loop_s": round(loop_s, 3),
        "per_call_us": round(loop_s / times["calls"] * 1e6, 2),
        "readable_after_start_s": round(ready - times["start"], 3),
        "readable_after_end_s": round(ready - times["end"], 3),
    }
    if "flushed" in times:
        report["client_flushed_after_end_s"] = round(times["flushed"] - times["end"], 3)
    return report


def event_bodies(attempt: int, points: int, per_request: int) -> tuple[list[Body], int]:
    """The forwarder's requests for ``points`` loss lines as EventWriter writes them, each
    batch packed as the host worker packs it (the compact form): [body], the end offset."""
    started = time.time() - points * 0.01
    lines = [
        f'{{"type": "metric", "time": {round(started + step * 0.01, 3)!r}, "key": "{KEY}", '
        f'"step": {step}, "value": {value!r}}}\n'.encode()
        for step, value in enumerate(loss_values(points))
    ]
    bodies = []
    offset = 0
    for first in range(0, points, per_request):
        data = b"".join(lines[first : first + per_request])
        end = offset + len(data)
        params = {"attempt": attempt, "start": offset, "end": end}
        bodies.append(Body(pack(data)[0], params, BLOCKS))
        offset = end
    return bodies, offset


def finish_run(agent: FakeHost, url: str, run_id: int, attempt: int, end: int) -> None:
    """End the run as a host worker does: a result line, then the finish report."""
    result = {"type": "result", "time": time.time(), "status": "succeeded", "reason": "bench"}
    line_end = end + len(json.dumps(result)) + 1
    tail = json.dumps({"attempt": attempt, "start": end, "end": line_end, "events": [result]})
    agent.session.post(
        url, data=tail, headers={"Content-Type": "application/json"}, timeout=60
    ).raise_for_status()
    agent.post(
        f"runs/{run_id}/finish/", {"attempt": attempt, "exit_code": 0, "exited_at": time.time()}
    )
    agent.running.remove(run_id)


def compact_points(response: Any) -> int | None:
    """How many points a compact whole read holds; None when it is the row form after all."""
    kind = response.headers.get("Content-Type", "")
    if kind.startswith("text/csv"):
        return max(0, len(response.content.splitlines()) - 1)
    if not kind.startswith("application/json"):
        return None
    body = response.json()
    if isinstance(body.get("points"), list):
        return None
    arrays = [value for value in body.values() if isinstance(value, list)]
    return len(arrays[0]) if arrays else None


def table_bytes(dsn: str, tables: tuple[str, ...], count_sql: str) -> dict[str, Any]:
    """pg_total_relation_size (heap, indexes, TOAST) of ``tables`` per point counted."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("VACUUM ANALYZE")
        sizes = {
            table: connection.execute("SELECT pg_total_relation_size(%s)", [table]).fetchone()[0]
            for table in tables
        }
        points = connection.execute(count_sql).fetchone()[0]
    total = sum(sizes.values())
    return {
        "points": points,
        "bytes": sizes,
        "bytes_per_point": round(total / points, 1) if points else None,
    }


@contextlib.contextmanager
def started(database: str, redis_db: int) -> Iterator[Npulab]:
    """A fresh stack on ``database`` ("sqlite" or "postgresql"), stopped and dropped on exit."""
    var_dir = Path(tempfile.mkdtemp(prefix="npulab-bench-mlflow-"))
    try:
        with launched_platform(
            services_for(database, redis_db), var_dir, database=DATABASE, redis_db=redis_db
        ) as platform:
            side = Npulab(platform, database)
            try:
                yield side
            finally:
                side.close()
    finally:
        shutil.rmtree(var_dir, ignore_errors=True)
