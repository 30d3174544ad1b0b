"""Metrics from unmodified scripts (issue 27 §5), one measure after the other on this machine.

    .venv/bin/python bench/capture.py [--points 10000] [--lines 60000] [--scalars 1000000]

1. The same user loop, ``mlflow.log_metric`` POINTS times (bench/capture_loop.py, this
   venv's MLflow client), against the run's own endpoint (``python -m workers.run``, the
   supervisor's MLflow API) and against ``mlflow server --workers 1`` on SQLite
   (bench/mlflow_server.py's virtualenv): seconds a call, and how long after the loop the
   last point is readable (in the run's events.jsonl, which the forwarder sends on; in
   MLflow's get-history), and the CPU a call of the client (the loop's process) and of
   the server (the supervisor's own process from the first points on; MLflow's server
   with its worker). Synchronous, then with MLFLOW_ENABLE_ASYNC_LOGGING=true.
2. Printed metric lines through the supervisor's capture (workers.capture.session.Capture:
   the queue, the recogniser, the events): CPU seconds a line, as a share of one core at
   1,000 lines a second.
3. A TensorBoard file of SCALARS scalars written by torch's SummaryWriter in another
   process while the reader scans it as it does in a run, then stopped as the supervisor
   stops it when the script has exited: seconds from the writer's closing of its file
   and from its exit until every scalar has been read, how many were unread at each, and
   the reader's CPU seconds (this process's: it does nothing else meanwhile).

The machine is shared: the load average is printed with each result.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import mlflow_server  # noqa: E402
from workers.capture.session import Capture  # noqa: E402
from workers.capture.sink import Sink  # noqa: E402
from workers.capture.tensorboard import TensorBoardReader  # noqa: E402
from workers.contract.capture import TENSORBOARD  # noqa: E402
from workers.events import EventWriter  # noqa: E402

LOOP = ROOT / "bench" / "capture_loop.py"
ASYNC = {"MLFLOW_ENABLE_ASYNC_LOGGING": "true"}


def load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def scratch(prefix: str) -> Path:
    """A folder of this benchmark's, removed when it ends (the runs' files are large)."""
    folder = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, folder, True)
    return Path(folder)


def count_loss(path: Path, offset: int, found: int) -> tuple[int, int]:
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except FileNotFoundError:
        return offset, found
    cut = data.rfind(b"\n") + 1
    return offset + cut, found + data[:cut].count(b'"key": "loss"')


def against_run(points: int, env: dict[str, str]) -> dict:
    work = scratch("npulab-bench-capture-")
    out = work / "loop.json"
    spec = {
        "kind": "training",
        "device_type": "cpu",
        "entry": str(LOOP),
        "args": [str(out), str(points)],
        "env": env,
        "timeout_s": 3600,
    }
    (work / "spec.json").write_text(json.dumps(spec))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "workers.run",
            str(work / "spec.json"),
            "--run-dir",
            str(work / "run"),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    events = work / "run" / "events.jsonl"
    offset = found = 0
    # The supervisor's own CPU (its MLflow server; the script is a child) from the first
    # points on, so that its start is not counted.
    supervisor = psutil.Process(process.pid)
    first: tuple[int, float] | None = None
    while found < points:
        offset, found = count_loss(events, offset, found)
        if first is None and found:
            first = (found, own_cpu(supervisor))
        if process.poll() is not None and found < points:
            offset, found = count_loss(events, offset, found)
            if found < points:
                raise RuntimeError(f"the run ended with {found} of {points} points")
        time.sleep(0.005)
    readable = time.time()
    assert first is not None
    server_cpu = (own_cpu(supervisor) - first[1]) / (points - first[0])
    process.wait()
    loop = json.loads(out.read_text())
    return report(loop, readable, points, server_cpu)


def own_cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def tree_cpu(pid: int) -> float:
    root = psutil.Process(pid)
    return sum(own_cpu(process) for process in [root, *root.children(recursive=True)])


def against_mlflow(points: int, env: dict[str, str]) -> dict:
    mlflow_server.ensure_venv()
    with mlflow_server.started("sqlite") as side:
        work = scratch("npulab-bench-capture-mlflow-")
        out = work / "loop.json"
        # The server's CPU (its uvicorn worker included) over the loop and the client's
        # few calls before it.
        server_cpu = tree_cpu(side.pid)
        process = subprocess.Popen(
            [sys.executable, str(LOOP), str(out), str(points)],
            env={**os.environ, **env, "MLFLOW_TRACKING_URI": side.url, **mlflow_server.QUIET},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while not out.exists():
            if process.poll() is not None and not out.exists():
                raise RuntimeError("the loop against mlflow server failed")
            time.sleep(0.05)
        server_cpu = (tree_cpu(side.pid) - server_cpu) / points
        loop = json.loads(out.read_text())
        runs = side.call("POST", "runs/search", json={"experiment_ids": ["0"]})["runs"]
        run_id = runs[0]["info"]["run_id"]
        while True:
            got = side.call(
                "GET", "metrics/get-history", params={"run_id": run_id, "metric_key": "loss"}
            )
            if len(got.get("metrics", [])) >= points:
                break
            time.sleep(0.01)
        readable = time.time()
        process.wait()
        return report(loop, readable, points, server_cpu)


def report(loop: dict, readable: float, points: int, server_cpu: float) -> dict:
    seconds = loop["end"] - loop["start"]
    return {
        "per_call_ms": round(1000 * seconds / points, 3),
        "client_cpu_ms_per_call": round(1000 * loop["cpu"] / points, 3),
        "server_cpu_ms_per_call": round(1000 * server_cpu, 3),
        "loop_s": round(seconds, 2),
        "readable_after_s": round(max(0.0, readable - loop["end"]), 3),
        "load": load(),
    }


LINES = [
    "| epoch   1 | {n:5d}/ 2983 batches | lr 20.00 | ms/batch 45.12 | loss  6.98 | ppl  1077.80",
    "{{'loss': 0.52, 'grad_norm': 1.3, 'learning_rate': 1e-05, 'epoch': 0.3, 'step': {n}}}",
    "Epoch [1/10], Step [{n}/600], Loss: 0.5234",
    "epoch: 1 step: {n}, loss is 2.3012",
    "INFO some log line without metrics, request {n} served",
]


def stdout_cost(lines: int) -> dict:
    work = str(scratch("npulab-bench-stdout-"))
    writer = EventWriter(os.path.join(work, "events.jsonl"))
    texts = [LINES[n % len(LINES)].format(n=n) for n in range(lines)]
    spec = {"stdout_metrics": True, "metric_patterns": [], "tensorboard_dirs": [work + "/none"]}
    os.makedirs(work + "/none")
    capture = Capture(spec, work, writer)
    capture.start()
    cpu = time.process_time()
    wall = time.perf_counter()
    for n, text in enumerate(texts):
        capture.line("stdout", text)
        if n % 5000 == 4999:
            time.sleep(0.01)  # a script prints over time: the queue never fills here
    capture.stop()
    cpu = time.process_time() - cpu
    writer.close()
    per_line = cpu / lines
    return {
        "lines": lines,
        "cpu_us_per_line": round(1e6 * per_line, 1),
        "core_pct_at_1000_lines_s": round(100 * per_line * 1000, 2),
        "wall_s": round(time.perf_counter() - wall, 2),
        "load": load(),
    }


WRITER = """
import sys, time
from torch.utils.tensorboard import SummaryWriter
writer = SummaryWriter(sys.argv[1], max_queue=10000, flush_secs=1)
for step in range(int(sys.argv[2])):
    writer.add_scalar("loss", 1.0 / (step + 1), step)
writer.close()
print(time.time())
"""


def tensorboard_tail(scalars: int) -> dict:
    """As in a run: the reader scans while the script writes, and once the script has
    exited the supervisor stops it (``Capture.stop``), which reads what is left."""
    work = scratch("npulab-bench-tb-")
    writer = EventWriter(str(work / "events.jsonl"))
    reader = TensorBoardReader([str(work / "tb")], Sink(writer, TENSORBOARD, 100))
    cpu = time.process_time()
    reader.start()
    started = time.time()
    script = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(work / "tb"), str(scalars)],
        stdout=subprocess.PIPE,
        text=True,
    )
    read_by: list[tuple[float, int]] = []  # (when, scalars read by then)
    while script.poll() is None:
        read_by.append((time.time(), reader.scalars))
        time.sleep(0.05)
    exited = time.time()
    unread_at_exit = scalars - reader.scalars
    reader.stop()
    read = time.time()
    cpu = time.process_time() - cpu  # this process only reads: the writer is another
    writer.close()
    if script.returncode or reader.scalars != scalars:
        raise RuntimeError(f"{reader.scalars} of {scalars} read, writer exit {script.returncode}")
    assert script.stdout is not None
    closed = float(script.stdout.read())  # the writer's file closed, its interpreter not yet
    unread_at_close = scalars - max([n for when, n in read_by if when <= closed] or [0])
    # When the last scalar was read: during the writer's exit, or by ``stop``.
    all_read = min([when for when, n in read_by if n == scalars] or [read])
    return {
        "scalars": scalars,
        "writer_s": round(closed - started, 1),
        "unread_at_close": unread_at_close,
        "unread_at_exit": unread_at_exit,
        "readable_after_close_s": round(all_read - closed, 2),
        "readable_after_exit_s": round(read - exited, 2),
        "reader_cpu_s": round(cpu, 1),
        "reader_cpu_us_per_scalar": round(1e6 * cpu / scalars, 1),
        "load": load(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=10_000)
    parser.add_argument("--lines", type=int, default=60_000)
    parser.add_argument("--scalars", type=int, default=1_000_000)
    parser.add_argument("--only", choices=("mlflow", "stdout", "tensorboard"))
    args = parser.parse_args()
    results: dict = {}
    if args.only in (None, "mlflow"):
        for mode, env in (("sync", {}), ("async", ASYNC)):
            results[f"mlflow {mode}: run endpoint"] = against_run(args.points, env)
            results[f"mlflow {mode}: mlflow server"] = against_mlflow(args.points, env)
            print(json.dumps(results, indent=1), flush=True)
    if args.only in (None, "stdout"):
        results["stdout capture"] = stdout_cost(args.lines)
        print(json.dumps(results["stdout capture"]), flush=True)
    if args.only in (None, "tensorboard"):
        results["tensorboard"] = tensorboard_tail(args.scalars)
        print(json.dumps(results["tensorboard"]), flush=True)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
