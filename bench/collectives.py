"""The collectives kind against a bare torch.distributed loop, on gloo (issue 29 §9).

Both run all_reduce on two ranks over the same message sizes, alternately (kind, bare,
kind, bare ...), one after the other on this machine: the kind through
``python -m workers.run`` (its supervisor, torchrun, its loop), the bare loop as the
smallest torchrun script that times ``dist.all_reduce``. The report gives each one's bus
bandwidth per size (median over rounds) and the kind's over the bare loop's at the
largest size (the target: within 10 %).

Two ranks on one machine stand for 2 hosts × 1 process: on one machine gloo's traffic
goes over loopback either way. Usage, from the repository root:

    .venv/bin/python bench/collectives.py [--rounds 3] [--max-bytes 16777216]
"""

from __future__ import annotations

import argparse
import json
import os
import platform as host_platform
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]

from bench.common import write_report  # noqa: E402
from workers.kinds.collectives.busbw import bus_factor, sizes  # noqa: E402

BARE = """
import json, sys, time
import torch, torch.distributed as dist
low, high, iters, warmup = (int(value) for value in sys.argv[1:5])
out = sys.argv[5]
dist.init_process_group("gloo")
n = dist.get_world_size()
rows = []
size = low
while True:
    count = max(size // 4 // n, 1) * n
    t = torch.ones(count)
    for _ in range(warmup):
        dist.all_reduce(t)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t)
    took = torch.tensor([(time.perf_counter() - start) / iters])
    dist.all_reduce(took, op=dist.ReduceOp.MAX)
    rows.append({"bytes": count * 4, "seconds": float(took.item())})
    if size >= high:
        break
    size = min(size * 2, high)
if dist.get_rank() == 0:
    json.dump(rows, open(out, "w"))
dist.destroy_process_group()
"""


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}


def kind_round(work: Path, args: argparse.Namespace) -> dict[int, float]:
    spec = {
        "kind": "collectives",
        "device_type": "cpu",
        "devices": 2,
        "ops": ["all_reduce"],
        "min_bytes": args.min_bytes,
        "max_bytes": args.max_bytes,
        "iters": args.iters,
        "warmup": args.warmup,
    }
    (work / "spec.json").write_text(json.dumps(spec))
    run_dir = Path(tempfile.mkdtemp(dir=work))
    subprocess.run(
        [sys.executable, "-m", "workers.run", str(work / "spec.json"), "--run-dir", str(run_dir)],
        env=env(),
        check=True,
        capture_output=True,
    )
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return {e["bytes"]: e["busbw_gbps"] for e in events if e["type"] == "busbw"}


def bare_round(work: Path, args: argparse.Namespace) -> dict[int, float]:
    script, out = work / "bare.py", work / "bare.json"
    script.write_text(BARE)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nnodes=1",
            "--nproc-per-node=2",
            str(script),
            str(args.min_bytes),
            str(args.max_bytes),
            str(args.iters),
            str(args.warmup),
            str(out),
        ],
        env=env(),
        check=True,
        capture_output=True,
    )
    factor = bus_factor("all_reduce", 2)
    return {
        row["bytes"]: row["bytes"] / row["seconds"] / 1e9 * factor
        for row in json.loads(out.read_text())
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--min-bytes", type=int, default=1024)
    parser.add_argument("--max-bytes", type=int, default=16 << 20)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    load_before = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="npulab-bench-collectives-"))
    kind: dict[int, list[float]] = {}
    bare: dict[int, list[float]] = {}
    for _ in range(args.rounds):
        for found, into in ((kind_round(work, args), kind), (bare_round(work, args), bare)):
            for size, value in found.items():
                into.setdefault(size, []).append(value)
    rows = [
        {
            "bytes": size,
            "kind_busbw_gbps": round(statistics.median(kind[size]), 4),
            "bare_busbw_gbps": round(statistics.median(bare[size]), 4),
        }
        for size in sorted(set(kind) & set(bare))
    ]
    largest = rows[-1]
    report = {
        "when": datetime.now().isoformat(timespec="seconds"),
        "machine": f"{host_platform.machine()}, {os.cpu_count()} cores",
        "load_average": {
            "start": [round(x, 2) for x in load_before],
            "end": [round(x, 2) for x in os.getloadavg()],
        },
        "rounds": args.rounds,
        "sizes": list(sizes(args.min_bytes, args.max_bytes)),
        "rows": rows,
        # The target is on this: at least 0.9.
        "kind_over_bare_at_largest": round(
            largest["kind_busbw_gbps"] / largest["bare_busbw_gbps"], 3
        ),
    }
    write_report("collectives", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
