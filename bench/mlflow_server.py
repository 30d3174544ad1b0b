"""The MLflow side of bench/mlflow_compare.py: its virtualenv, its server, the measures on it.

MLflow goes in a virtualenv of its own (bench/.mlflow-venv/, git-ignored), made on first
use and kept: ``mlflow==VERSION`` and psycopg2-binary for its PostgreSQL store, from the
package index. Its server runs as ``mlflow server --workers 1`` (uvicorn, its fastest
setting here), on a fresh SQLite file or PostgreSQL database each start, and is driven
over its REST API by the same client code as npulab (requests, one keep-alive session).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests

from bench.mlflow_common import KEY, ServerCpu, loss_values, post_all, timed_reads, wait_for
from bench.mlflow_npulab import LOOP, loop_report, table_bytes
from harness.services import POSTGRES
from harness.stack import create_postgres_database, free_port

NAME = "MLflow"
VERSION = "3.17.2"
VENV = Path(__file__).resolve().parent / ".mlflow-venv"
REQUIREMENTS = (f"mlflow=={VERSION}", "psycopg2-binary")
DATABASE = "npulab_bench_mlflow_mlflow"
# MLflow's log-batch takes at most 1,000 metrics a request.
MAX_BATCH = 1000
# What MLflow's own client asks get-history for a page (GET_METRIC_HISTORY_MAX_RESULTS).
HISTORY_PAGE = 25_000
# The client's buffered asynchronous mode: without it each log_metric(synchronous=False)
# is a request of its own; with it the queue is merged into log-batch requests of up to
# 1,000 metrics every second (the least it takes), sent from a pool of 10 threads.
BUFFERED = {"MLFLOW_ASYNC_LOGGING_BUFFERING_SECONDS": "1"}
# Its telemetry off (nothing outside this machine is reachable), and its job runner (huey
# consumers for GenAI jobs, seven processes, nothing to do with tracking) not started.
QUIET = {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
}


def ensure_venv() -> Path:
    """MLflow's interpreter, installing it first unless this exact set is there."""
    marker = VENV / "bench-requirements.txt"
    wanted = "\n".join(REQUIREMENTS) + "\n"
    python = VENV / "bin" / "python"
    if python.exists() and marker.exists() and marker.read_text() == wanted:
        return python
    print(f"installing {', '.join(REQUIREMENTS)} into {VENV} ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            *REQUIREMENTS,
        ],
        check=True,
    )
    marker.write_text(wanted)
    return python


class Mlflow:
    """One started MLflow server and a REST client for it."""

    name = NAME

    def __init__(self, url: str, pid: int, database: str, dsn: str | None, uri: str) -> None:
        self.url = url
        self.api = f"{url}/api/2.0/mlflow"
        self.pid = pid
        self.database = database
        self.dsn = dsn
        self.uri = uri
        self.session = requests.Session()
        self.run_id = ""

    def call(self, method: str, endpoint: str, **kwargs: Any) -> dict[str, Any]:
        response = self.session.request(method, f"{self.api}/{endpoint}", timeout=300, **kwargs)
        if response.status_code != 200:
            raise RuntimeError(f"{method} {endpoint}: HTTP {response.status_code}: {response.text}")
        return response.json()

    def new_run(self, name: str) -> str:
        body = {"experiment_id": "0", "run_name": name, "start_time": int(time.time() * 1000)}
        return self.call("POST", "runs/create", json=body)["run"]["info"]["run_id"]

    def ingest(self, points: int, per_request: int) -> dict[str, Any]:
        """``points`` of one metric of a new run through log-batch, ``per_request`` a request."""
        if per_request > MAX_BATCH:
            return {"skipped": f"log-batch takes at most {MAX_BATCH:,} metrics a request"}
        run_id = self.new_run(f"bench: {points:,} points at {per_request:,} a request")
        started = int(time.time() * 1000) - points * 10
        metrics = [
            {"key": KEY, "value": value, "timestamp": started + step * 10, "step": step}
            for step, value in enumerate(loss_values(points))
        ]
        bodies = [
            json.dumps({"run_id": run_id, "metrics": metrics[first : first + per_request]}).encode()
            for first in range(0, points, per_request)
        ]
        cpu = ServerCpu(self.pid, DATABASE, self.dsn)
        result = post_all(self.session, f"{self.api}/runs/log-batch", bodies, cpu)
        self.run_id = run_id
        result["points_per_s"] = round(points / result.pop("_elapsed"))
        return result

    def storage(self) -> dict[str, Any] | None:
        if self.dsn is None:
            return None
        return table_bytes(self.dsn, ("metrics", "latest_metrics"), "SELECT count(*) FROM metrics")

    def history(self, run_id: str, page: int | None = HISTORY_PAGE) -> tuple[int, int]:
        """The whole series as MLflow's client reads it: get-history, 25,000 a page
        (``page=None``: in one request, one query)."""
        points = size = 0
        token = None
        while True:
            params: dict[str, Any] = {"run_id": run_id, "metric_key": KEY}
            if page:
                params["max_results"] = page
            if token:
                params["page_token"] = token
            response = self.session.get(
                f"{self.api}/metrics/get-history", params=params, timeout=300
            )
            response.raise_for_status()
            body = response.json()
            points += len(body.get("metrics", []))
            size += len(response.content)
            token = body.get("next_page_token")
            if not token:
                return points, size

    def read_whole(self, repeat: int) -> dict[str, Any]:
        """get-history in one response, and paged as MLflow's own client reads it."""
        return {
            "rows": timed_reads(lambda: self.history(self.run_id, page=None), repeat),
            "rows_paged": timed_reads(lambda: self.history(self.run_id), repeat),
        }

    def read_downsampled(self, repeat: int, buckets: int) -> dict[str, Any]:
        """get-history-bulk-interval: the sampled history MLflow's UI charts read."""
        url = f"{self.url}/ajax-api/2.0/mlflow/metrics/get-history-bulk-interval"
        params = {"run_ids": self.run_id, "metric_key": KEY, "max_results": buckets}

        def read() -> tuple[int, int]:
            response = self.session.get(url, params=params, timeout=60)
            response.raise_for_status()
            return len(response.json().get("metrics", [])), len(response.content)

        return timed_reads(read, repeat)

    def latest_step(self, run_id: str) -> int:
        """The step of the run's latest ``loss`` (runs/get): a cheap poll of how far it is."""
        body = self.call("GET", "runs/get", params={"run_id": run_id})
        found = body["run"].get("data", {}).get("metrics", [])
        return max((int(item.get("step", 0)) for item in found if item["key"] == KEY), default=-1)

    def loop(self, points: int, work: Path) -> dict[str, Any]:
        """MLflow's client in its own interpreter logs ``points`` steps asynchronously;
        when all are readable through the server."""
        run_id = self.new_run(f"bench: a loop of {points:,} log_metric calls")
        out = work / "mlflow-loop.json"
        out.unlink(missing_ok=True)
        argv = [str(VENV / "bin" / "python"), str(LOOP), "mlflow", str(out), str(points)]
        client = subprocess.Popen(
            [*argv, self.url, run_id],
            env={**os.environ, **QUIET, **BUFFERED},
            stdout=subprocess.DEVNULL,
            stderr=open(work / "mlflow-loop.log", "w"),  # noqa: SIM115 (the child owns it)
        )
        try:
            # The latest step says the last batch is in; batches go from a pool of threads,
            # so the whole history is then counted (one query: all of it was readable when
            # the count began), and counted again until it is complete.
            wait_for(
                lambda: self.latest_step(run_id) >= points - 1, 600, 0.02, "the loop's last step"
            )
            while True:
                ready = time.time()
                if self.history(run_id, page=None)[0] >= points:
                    break
            code = client.wait(timeout=300)
        finally:
            if client.poll() is None:
                client.kill()
        if code != 0:
            raise RuntimeError(f"the MLflow loop exited {code}: see {work / 'mlflow-loop.log'}")
        return loop_report(json.loads(out.read_text()), ready)

    def close(self) -> None:
        self.session.close()


def stop(process: subprocess.Popen) -> None:
    """The server's whole process group: uvicorn's workers go with it."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    with contextlib.suppress(ProcessLookupError):  # what outlived it in its group
        os.killpg(process.pid, signal.SIGKILL)


@contextlib.contextmanager
def started(database: str) -> Iterator[Mlflow]:
    """A fresh ``mlflow server --workers 1`` on ``database``, stopped and dropped on exit."""
    work = Path(tempfile.mkdtemp(prefix="npulab-bench-mlflow-server-"))
    drop = None
    dsn = None
    if database == "sqlite":
        uri = f"sqlite:///{work / 'mlflow.sqlite3'}"
    else:
        server = f"postgres://postgres@{POSTGRES[0]}:{POSTGRES[1]}/postgres"
        dsn, drop = create_postgres_database(server, DATABASE)
        # SQLAlchemy 2.1 takes psycopg 3 for a bare postgresql://; the driver here is psycopg2.
        uri = "postgresql+psycopg2" + dsn[len("postgres") :]
    port = free_port()
    argv = [
        str(VENV / "bin" / "mlflow"),
        "server",
        "--backend-store-uri",
        uri,
        "--default-artifact-root",
        str(work / "artifacts"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    log = open(work / "server.log", "w")  # noqa: SIM115 (closed below, after the server)
    process = subprocess.Popen(
        argv,
        env={**os.environ, **QUIET},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: healthy(url, process, work), 300, 0.2, "mlflow server /health")
        side = Mlflow(url, process.pid, DATABASE, dsn, uri)
        try:
            yield side
        finally:
            side.close()
    finally:
        stop(process)
        log.close()
        if drop is not None:
            drop()
        shutil.rmtree(work, ignore_errors=True)


def healthy(url: str, process: subprocess.Popen, work: Path) -> bool:
    if process.poll() is not None:
        tail = (work / "server.log").read_text()[-3000:]
        raise RuntimeError(f"mlflow server exited {process.returncode}:\n{tail}")
    try:
        return requests.get(f"{url}/health", timeout=2).status_code == 200
    except requests.RequestException:
        return False
