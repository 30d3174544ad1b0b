"""Device telemetry: 64 hosts x 8 devices at one sample per 5 s, and a 7-day chart of one device.

A real stack (gunicorn, the Celery control worker with beat; harness/stack.py) and this
script as 64 fake host workers over HTTP, each with its own host token, each sending what a
host worker sends (workers/host/telemetry.py): every ``--send-s`` (the worker's default, or 0:
every interval) one batch of the rounds sampled meanwhile, a round being its 8 chips' samples
plus one of the host itself, to POST /api/v1/agent/telemetry/. The chips' readings
are those of a real capture (8 x 910B3, npu-smi 25.2.0) with a little noise; the hosts'
phases are spread over the send period as real ones would be.

Measured over ``--minutes`` of real time, after a warm-up minute:

- the web server's CPU seconds (gunicorn and its workers, from /proc),
- the control worker's (the roll-up and retention run there every minute; one roll-up is
  also timed on its own at the end),
- the database: CPU seconds of the PostgreSQL backends serving this database (sampled
  from /proc every second) and its ``active_time`` (pg_stat_database: time spent in
  statements), each per simulated minute and as a share of one core.

Before that, one device is given seven days of history at 5 s through the same endpoint
(121,000 samples in batches of 2,000) and rolled up once; then its 7-day chart is timed:
the chart fragment the host page loads (read + render, median of ``--repeat``) and, in
headless Chromium, the click on "7d" until the charts are drawn.

Target (issue 15): the whole ingestion under 5 % of one core. Usage:

    .venv/bin/python bench/telemetry.py                 # PostgreSQL + Redis when here
    .venv/bin/python bench/telemetry.py --minutes 1 --repeat 3   # a quick run
    .venv/bin/python bench/telemetry.py --minutes 1 --no-chart   # the sustained load only
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform as host_platform
import random
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "platform")]

from bench.common import BENCH_REDIS_DB, database_dsn, percentile, write_report  # noqa: E402
from workers.contract.telemetry import DEFAULT_SEND_S  # noqa: E402

HOSTS = 64
DEVICES = 8
INTERVAL_S = 5.0
HISTORY_DAYS = 7
BENCH_DATABASE = "npulab_bench_telemetry"
CAPTURE = (
    "tests/fixtures/ascend/npu-smi-info/01_910B3_8card_npu-smi-25.2.0_procs_and_no-running.txt"
)
TARGET_CORE_PCT = 5.0
# The control worker's scheduler tick: the platform's default (NPULAB_SCHEDULER_TICK_S), not
# the test stack's 1 s, whose idle cost swung the control worker's line by more than the
# telemetry costs.
SCHEDULER_TICK_S = 5


def capture_chips() -> list[dict[str, Any]]:
    from workers.collect.npu_smi import parse_info
    from workers.telemetry.npu import table_samples

    table = table_samples(parse_info((REPO / CAPTURE).read_text(encoding="utf-8")), 0.0, {}, True)
    chips = []
    for index in sorted(table):
        chip = dict(table[index])
        chip.pop("_chip", None)
        chips.append(chip)
    return chips


def batch(chips: list[dict[str, Any]], when: float, rng: random.Random) -> list[dict[str, Any]]:
    """One interval of one host: its chips, with readings that move a little, and itself."""
    samples = copy.deepcopy(chips)
    for sample in samples:
        sample["time"] = when
        readings = sample["readings"]
        readings["temperature_c"] += rng.uniform(-2, 2)
        readings["power_w"] += rng.uniform(-5, 5)
        readings["utilization_pct"] = float(rng.choice((0, 0, 35, 92)))
    samples.append({"time": when, "index": None, "health": "UNKNOWN", "readings": {"load_1m": 3.2}})
    return samples


class CpuMeter:
    """CPU seconds of a process tree, and of the PostgreSQL backends of one database."""

    def __init__(self, database: str | None, dsn: str | None) -> None:
        self.database = database
        self.dsn = dsn
        self.backends: dict[int, float] = {}
        self.start_backends: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def tree(pid: int) -> float:
        import psutil

        root = psutil.Process(pid)
        total = 0.0
        for process in [root, *root.children(recursive=True)]:
            try:
                times = process.cpu_times()
                total += times.user + times.system
            except psutil.NoSuchProcess:
                pass
        return total

    def _backend_pids(self, cursor: Any) -> list[int]:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [self.database],
        )
        return [row[0] for row in cursor.fetchall()]

    def active_ms(self) -> float | None:
        if self.dsn is None:
            return None
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as connection:
            row = connection.execute(
                "SELECT active_time FROM pg_stat_database WHERE datname = %s", [self.database]
            ).fetchone()
        return float(row[0]) if row and row[0] is not None else None

    def start(self) -> None:
        if self.dsn is None:
            return
        self.start_backends = self._sample_once()
        self.backends = dict(self.start_backends)
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _sample_once(self) -> dict[int, float]:
        import psutil
        import psycopg

        found: dict[int, float] = {}
        with psycopg.connect(self.dsn, autocommit=True) as connection:
            for pid in self._backend_pids(connection.cursor()):
                try:
                    times = psutil.Process(pid).cpu_times()
                    found[pid] = times.user + times.system
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    pass
        return found

    def _watch(self) -> None:
        while not self._stop.wait(1.0):
            for pid, cpu in self._sample_once().items():
                self.backends[pid] = cpu

    def backend_seconds(self) -> float | None:
        if self.dsn is None:
            return None
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for pid, cpu in self._sample_once().items():
            self.backends[pid] = cpu
        return sum(cpu - self.start_backends.get(pid, 0.0) for pid, cpu in self.backends.items())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=3.0, help="measured minutes")
    parser.add_argument("--repeat", type=int, default=7, help="7-day chart reads to time")
    parser.add_argument("--hosts", type=int, default=HOSTS)
    parser.add_argument("--redis-db", type=int, default=BENCH_REDIS_DB)
    parser.add_argument("--no-chart", action="store_true", help="skip the 7-day chart")
    parser.add_argument(
        "--tick-s",
        type=int,
        default=SCHEDULER_TICK_S,
        help=f"the control worker's scheduler tick (default {SCHEDULER_TICK_S}, the platform's)",
    )
    parser.add_argument(
        "--send-s",
        type=float,
        default=DEFAULT_SEND_S,
        help=f"seconds between a host's sends (default {DEFAULT_SEND_S:g}; 0: every interval)",
    )
    args = parser.parse_args()

    from harness.services import detect
    from harness.stack import launched_platform

    services = detect()
    var_dir = Path(tempfile.mkdtemp(prefix="npulab-bench-telemetry-"))
    with launched_platform(
        services,
        var_dir,
        database=BENCH_DATABASE,
        redis_db=args.redis_db,
        host_worker=False,
        settings={"NPULAB_SCHEDULER_TICK_S": str(args.tick_s)},
    ) as platform:
        dsn = database_dsn(services.database_url, BENCH_DATABASE)
        report = run(platform, args, dsn)
    report["scheduler_tick_s"] = args.tick_s
    report["machine"] = {
        "cpus": os.cpu_count(),
        "platform": host_platform.platform(),
        "python": host_platform.python_version(),
        "database": "PostgreSQL" if services.database_url else "SQLite",
        "load_average": os.getloadavg(),
    }
    write_report("telemetry", report)
    return 0


def tokens(platform: Any, names: list[str]) -> dict[str, str]:
    code = (
        "import json; from npulab.hosts.models import Host; "
        "from npulab.hosts.services import do_issue_host_token; "
        f"print(json.dumps({{n: do_issue_host_token(Host.objects.get_or_create(name=n)[0]) "
        f"for n in {names!r}}}))"
    )
    return json.loads(platform.manage("shell", "-c", code).splitlines()[-1])


def run(platform: Any, args: argparse.Namespace, dsn: str | None) -> dict[str, Any]:
    import requests

    names = [f"bench-{n:02d}" for n in range(args.hosts)]
    keys = tokens(platform, names)
    sessions = {}
    for name in names:
        session = requests.Session()
        session.headers["Authorization"] = f"Token {keys[name]}"
        facts = {
            "device_type": "npu",
            "devices": [{"index": i, "name": "Ascend 910B3"} for i in range(DEVICES)],
            "hostname": f"{name}.lab",
            "worker_version": "0.1.0",
            "python": "3.10.12",
        }
        session.post(f"{platform.url}/api/v1/agent/register/", json=facts, timeout=30)
        sessions[name] = session
    chips = capture_chips()
    rng = random.Random(15)
    report: dict[str, Any] = {"hosts": args.hosts, "devices_per_host": DEVICES}
    if not args.no_chart:
        report["history"] = history(platform, sessions[names[0]], chips, rng)
    report["sustained"] = sustained(platform, sessions, chips, rng, args.minutes, dsn, args.send_s)
    report["roll_up_steady"] = roll_up_once(platform)
    if not args.no_chart:
        report["chart_7d"] = chart(platform, names[0], args.repeat)
    return report


def history(platform: Any, session: Any, chips: list[dict], rng: random.Random) -> dict:
    """Seven days of device 0 of the first host at 5 s, then its one big roll-up."""
    now = time.time()
    start = now - HISTORY_DAYS * 86400 + 600
    chip = chips[0]
    samples = []
    when = start
    while when < now - 600:
        sample = copy.deepcopy(chip)
        sample["time"] = when
        sample["readings"]["temperature_c"] = 40 + 10 * ((when // 3600) % 3) + rng.uniform(-1, 1)
        sample["readings"]["power_w"] = 90 + rng.uniform(-20, 20)
        samples.append(sample)
        when += INTERVAL_S
    began = time.perf_counter()
    for offset in range(0, len(samples), 2000):
        response = session.post(
            f"{platform.url}/api/v1/agent/telemetry/",
            json={"samples": samples[offset : offset + 2000]},
            timeout=120,
        )
        response.raise_for_status()
    sent_s = time.perf_counter() - began
    began = time.perf_counter()
    rolled = platform.manage(
        "shell",
        "-c",
        "from npulab.telemetry.services import do_roll_up_telemetry; print(do_roll_up_telemetry())",
    )
    return {
        "samples": len(samples),
        "send_s": round(sent_s, 2),
        "samples_per_s": round(len(samples) / sent_s),
        "roll_up_s_with_process_start": round(time.perf_counter() - began, 2),
        "roll_up": rolled.splitlines()[-1],
    }


def sustained(
    platform: Any,
    sessions: dict[str, Any],
    chips: list[dict],
    rng: random.Random,
    minutes: float,
    dsn: str | None,
    send_s: float,
) -> dict[str, Any]:
    names = list(sessions)
    # Rounds a send holds: the intervals since the host's last send.
    rounds = max(1, round(send_s / INTERVAL_S))
    period = rounds * INTERVAL_S
    url = f"{platform.url}/api/v1/agent/telemetry/"
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()

    def send(name: str, when: float) -> None:
        samples = []
        for back in range(rounds - 1, -1, -1):
            samples += batch(chips, when - back * INTERVAL_S, rng)
        body = {"samples": samples}
        began = time.perf_counter()
        try:
            response = sessions[name].post(url, json=body, timeout=30)
            ok = response.status_code == 200 and not response.json()["rejected"]
            error = "" if ok else f"{response.status_code} {response.text[:200]}"
        except Exception as exc:  # a bench reports every failure
            error = repr(exc)
        with lock:
            latencies.append(time.perf_counter() - began)
            if error:
                failures.append(error)

    def drive(seconds: float) -> int:
        began = time.time()
        sent = 0
        with ThreadPoolExecutor(max_workers=8) as pool:
            tick = 0
            while time.time() - began < seconds:
                for n, name in enumerate(names):
                    due = began + tick * period + n * period / len(names)
                    wait = due - time.time()
                    if wait > 0:
                        time.sleep(wait)
                    pool.submit(send, name, time.time())
                    sent += 1
                tick += 1
        return sent

    web_pid = platform.processes["web"].process.pid
    control_pid = platform.processes["control"].process.pid

    def measure(seconds: float, load: bool) -> dict[str, Any]:
        """CPU seconds per minute of each part over ``seconds``, with or without the hosts."""
        meter = CpuMeter(BENCH_DATABASE, dsn)
        web0, control0 = CpuMeter.tree(web_pid), CpuMeter.tree(control_pid)
        active0 = meter.active_ms()
        meter.start()
        began = time.time()
        sent = 0
        if load:
            sent = drive(seconds)
        else:
            time.sleep(seconds)
        elapsed = time.time() - began
        per_minute = 60 / elapsed
        backend = meter.backend_seconds()
        active1 = meter.active_ms()
        parts = {
            "web": CpuMeter.tree(web_pid) - web0,
            "control": CpuMeter.tree(control_pid) - control0,
            "db_backends": backend,
            "db_active": None if active0 is None or active1 is None else (active1 - active0) / 1e3,
        }
        return {
            "measured_s": round(elapsed, 1),
            "batches": sent,
            **{
                f"{name}_s_per_min": None if value is None else round(value * per_minute, 3)
                for name, value in parts.items()
            },
        }

    drive(60)  # warm-up: connections, the first roll-up of every device
    idle = measure(60, load=False)  # the control worker's ticks, beat, idle connections
    latencies.clear()
    loaded = measure(minutes * 60, load=True)
    net = {}
    for part in ("web", "control", "db_backends", "db_active"):
        key = f"{part}_s_per_min"
        if loaded[key] is not None and idle[key] is not None:
            net[key] = round(loaded[key] - idle[key], 3)
    cpu = sum(net.get(f"{part}_s_per_min", 0.0) for part in ("web", "control", "db_backends"))
    return {
        "idle": idle,
        "loaded": loaded,
        "telemetry_net": net,
        "send_s": period,
        "rounds_per_batch": rounds,
        "samples_per_min": round(
            loaded["batches"] * rounds * (DEVICES + 1) * 60 / loaded["measured_s"]
        ),
        "failures": len(failures),
        "first_failures": failures[:3],
        "latency_ms_p50": round(statistics.median(latencies) * 1000, 1),
        "latency_ms_p95": round(percentile(latencies, 0.95) * 1000, 1),
        # CPU seconds a minute over 60 is the share of one core.
        "platform_cpu_core_pct": round(cpu / 60 * 100, 2),
        "target_core_pct": TARGET_CORE_PCT,
    }


def roll_up_once(platform: Any) -> dict[str, Any]:
    """One roll-up of every device's last minutes, as the beat runs it each minute: its CPU
    in the process that runs it (the database's share is in db_active above)."""
    code = (
        "import json, time; from npulab.telemetry.services import do_roll_up_telemetry; "
        "cpu, wall = time.process_time(), time.perf_counter(); done = do_roll_up_telemetry(); "
        "print(json.dumps({'cpu_ms': round((time.process_time() - cpu) * 1000, 1), "
        "'wall_ms': round((time.perf_counter() - wall) * 1000, 1), **done}))"
    )
    return json.loads(platform.manage("shell", "-c", code).splitlines()[-1])


def chart(platform: Any, host: str, repeat: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    from harness.stack import CHROMIUM_ARGS, chromium_path

    executable = chromium_path()
    if executable is None:
        return {"skipped": "no chromium on PATH (Debian: apt-get install chromium)"}
    result: dict[str, Any] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        platform.log_in(page)
        fragment = f"{platform.url}/hosts/{host}/telemetry/?window=7d"
        reads = []
        for _ in range(repeat + 1):
            began = time.perf_counter()
            response = page.request.get(fragment)
            assert response.ok, response.status
            body = response.text()
            reads.append(time.perf_counter() - began)
        reads = reads[1:]  # the first warms the connection
        result["fragment_ms_median"] = round(statistics.median(reads) * 1000, 1)
        result["fragment_bytes"] = len(body)
        page.goto(f"{platform.url}/hosts/{host}/")
        page.wait_for_selector('.telemetry-charts[data-window="6h"][data-drawn="1"]')
        draws = []
        for _ in range(repeat):
            began = time.perf_counter()
            page.click('#telemetry-windows button[data-window="7d"]')
            page.wait_for_selector(
                '.telemetry-charts[data-window="7d"][data-drawn="1"] canvas', timeout=60_000
            )
            draws.append(time.perf_counter() - began)
            page.click('#telemetry-windows button[data-window="1h"]')
            page.wait_for_selector('.telemetry-charts[data-window="1h"][data-drawn="1"]')
        result["click_to_drawn_ms_median"] = round(statistics.median(draws) * 1000, 1)
        result["click_to_drawn_ms_max"] = round(max(draws) * 1000, 1)
        shot = REPO / "bench" / "results" / "telemetry-7d.png"
        shot.parent.mkdir(exist_ok=True)
        page.click('#telemetry-windows button[data-window="7d"]')
        page.wait_for_selector('.telemetry-charts[data-window="7d"][data-drawn="1"] canvas')
        page.locator("#host-telemetry").screenshot(path=str(shot))
        result["screenshot"] = str(shot.relative_to(REPO))
        browser.close()
    return result


if __name__ == "__main__":
    raise SystemExit(main())
