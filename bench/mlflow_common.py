"""What both sides of bench/mlflow_compare.py share: the points, timing, CPU and the idle gate."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from bench.common import stats
from bench.mlflow_loop import loss
from bench.telemetry import CpuMeter

KEY = "loss"
# How long the server's idle CPU is sampled before an ingestion, to take it out.
IDLE_SAMPLE_S = 3.0


def loss_values(points: int) -> list[float]:
    """The series both servers take and serve: the curve the loop logs too."""
    return [loss(step, points) for step in range(points)]


class ServerCpu:
    """CPU seconds the server spent over a measure: its process tree and, on PostgreSQL,
    the backends of its database (SQLite runs inside the server's processes), less what
    the same parts spend idle over as long (npulab's test stack has a control worker that
    ticks every second on the same database, a host worker and heartbeats)."""

    def __init__(self, pid: int, database: str | None, dsn: str | None) -> None:
        self.pid = pid
        self.database = database
        self.dsn = dsn
        self.idle = (0.0, 0.0)  # CPU seconds a second: server, database
        self.spent = (0.0, 0.0, 1.0)  # server, database, elapsed

    def _sample(self, run: Callable[[], None]) -> tuple[float, float, float]:
        meter = CpuMeter(self.database, self.dsn)
        before = CpuMeter.tree(self.pid)
        meter.start()
        began = time.perf_counter()
        run()
        elapsed = time.perf_counter() - began
        return CpuMeter.tree(self.pid) - before, meter.backend_seconds() or 0.0, elapsed

    def calibrate(self, seconds: float) -> None:
        server, database, elapsed = self._sample(lambda: time.sleep(seconds))
        self.idle = (server / elapsed, database / elapsed)

    def measure(self, run: Callable[[], None]) -> None:
        self.spent = self._sample(run)

    def per_request_ms(self, requests: int) -> dict[str, float]:
        server, database, elapsed = self.spent
        server = max(0.0, server - self.idle[0] * elapsed)
        database = max(0.0, database - self.idle[1] * elapsed)
        return {
            "server_process_ms": round(server / requests * 1000, 2),
            "database_backend_ms": round(database / requests * 1000, 2),
            "total_ms": round((server + database) / requests * 1000, 2),
            "idle_cpu_pct_subtracted": round(sum(self.idle) * 100, 1),
        }


class Body(NamedTuple):
    """A request body with its query parameters and content type."""

    data: bytes
    params: dict[str, int]
    content_type: str


def post_all(
    session: Any, url: str, bodies: list[bytes] | list[Body], cpu: ServerCpu
) -> dict[str, Any]:
    """Send ``bodies`` one after another on one keep-alive session: the same client both ways.

    A body is JSON, or a ``Body`` with its query and content type (npulab's compact form).
    """
    latencies = []

    def send() -> None:
        for item in bodies:
            body = item if isinstance(item, Body) else Body(item, {}, "application/json")
            sent = time.perf_counter()
            response = session.post(
                url,
                data=body.data,
                params=body.params,
                headers={"Content-Type": body.content_type},
                timeout=300,
            )
            latencies.append(time.perf_counter() - sent)
            if response.status_code != 200:
                raise RuntimeError(f"POST {url}: HTTP {response.status_code}: {response.text}")

    cpu.calibrate(IDLE_SAMPLE_S)
    cpu.measure(send)
    elapsed = cpu.spent[2]
    return {
        "requests": len(bodies),
        "seconds": round(elapsed, 3),
        "request_ms": stats(latencies, 1000, 2),
        "server_cpu_per_request": cpu.per_request_ms(len(bodies)),
        "_elapsed": elapsed,
    }


def timed_reads(read: Callable[[], tuple[int, int]], repeat: int) -> dict[str, Any]:
    """``read()`` once to warm up, then ``repeat`` times; it returns (points, bytes)."""
    read()
    samples = []
    points = size = 0
    for _ in range(repeat):
        started = time.perf_counter()
        points, size = read()
        samples.append(time.perf_counter() - started)
    return {"ms": stats(samples, 1000, 1), "points": points, "bytes": size}


def wait_for(check: Callable[[], bool], timeout: float, every: float, what: str) -> float:
    """Poll ``check`` until it is true; the wall-clock time (Unix seconds) it first was."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return time.time()
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout} s")
        time.sleep(every)


def busy_fraction(seconds: float) -> float:
    """The share of all CPUs not idle over ``seconds`` (from /proc/stat; iowait counts idle)."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat") as handle:
            fields = [int(value) for value in handle.readline().split()[1:]]
        return sum(fields), fields[3] + fields[4]

    total0, idle0 = sample()
    time.sleep(seconds)
    total1, idle1 = sample()
    return 1.0 - (idle1 - idle0) / max(1, total1 - total0)


def idle_gate(max_busy_pct: float, timeout_s: float, sample_s: float = 1.0) -> dict[str, Any]:
    """Wait until the CPUs are idle enough to start a server: two samples in a row under
    ``max_busy_pct`` busy. After ``timeout_s`` it goes on and says the gate was not met."""
    started = time.monotonic()
    calm = 0
    busy = 100.0
    while True:
        busy = busy_fraction(sample_s) * 100
        calm = calm + 1 if busy <= max_busy_pct else 0
        waited = time.monotonic() - started
        if calm >= 2 or waited >= timeout_s:
            return {
                "met": calm >= 2,
                "waited_s": round(waited, 1),
                "busy_pct": round(busy, 1),
                "load_1m": round(os.getloadavg()[0], 2),
            }
