"""A parity run of a 100-layer MLP on the CPU against what it must at least do.

Issue 33's target: the parity run (``python -m workers.run``, both sides with msprobe's
tensor dump, msprobe's compare, npulab's judging and events) finishes within 3x the time
of two plain forward+backward runs of the same script (``builtin:mlp`` without a dump,
each a process of its own, as each side is) plus msprobe's compare of the same dumps. The
rounds alternate the two so drift of a shared machine falls on both; medians are
reported with the load average. Usage, from the repository root:

    .venv/bin/python bench/parity.py [--layers 100] [--rounds 3]

Writes bench/results/parity.json.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform as host_platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"


def timed(command: list[str], cwd: str, env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def plain(layers: int, work: str) -> float:
    """One process running the MLP's forward and backward without any dump."""
    env = dict(os.environ, NPULAB_PARITY_LAYERS=str(layers), PYTHONPATH=str(REPO))
    return timed([sys.executable, "-m", "workers.parity.builtin"], work, env)


def parity(layers: int, work: str) -> tuple[float, float, dict]:
    """The parity run, and msprobe's compare alone on the dumps it left."""
    spec = Path(work) / "spec.json"
    spec.write_text(
        json.dumps(
            {
                "kind": "parity",
                "device_type": "cpu",
                "entry": "builtin:mlp",
                "layers": layers,
                "timeout_s": 3600,
            }
        )
    )
    run_dir = Path(work) / "run"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    total = timed(
        [sys.executable, "-m", "workers.run", str(spec), "--run-dir", str(run_dir)], work, env
    )
    result = json.loads((run_dir / "events.jsonl").read_text().splitlines()[-1])
    steps = [glob.glob(str(run_dir / "parity" / side / "dump" / "step0"))[0] for side in "ab"]
    out = Path(work) / "compare"
    compare = timed(
        [
            sys.executable,
            "-m",
            "msprobe.msprobe",
            "compare",
            "-tp",
            steps[1],
            "-gp",
            steps[0],
            "-o",
            str(out),
        ],
        work,
    )
    return total, compare, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rounds = []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as work:
            two_plain = plain(args.layers, work) + plain(args.layers, work)
            total, compare, result = parity(args.layers, work)
        rounds.append(
            {
                "parity_s": total,
                "two_plain_s": two_plain,
                "compare_s": compare,
                "ratio": total / (two_plain + compare),
                "status": result["status"],
                "layers_compared": result["summary"].get("layers"),
                "dump_bytes": result["summary"].get("dump_bytes"),
                "load_average": os.getloadavg(),
            }
        )
        print(json.dumps(rounds[-1]), flush=True)
    report = {
        "machine": f"{os.cpu_count()} CPUs, Python {host_platform.python_version()}",
        "mlp_layers": args.layers,
        "rounds": rounds,
        "median_parity_s": statistics.median(r["parity_s"] for r in rounds),
        "median_baseline_s": statistics.median(r["two_plain_s"] + r["compare_s"] for r in rounds),
        "median_ratio": statistics.median(r["ratio"] for r in rounds),
        "target_ratio": 3.0,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "parity.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps({key: value for key, value in report.items() if key != "rounds"}))


if __name__ == "__main__":
    main()
