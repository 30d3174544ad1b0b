"""Profile summaries: time and peak memory against ``json.load`` and HTA on the same traces.

Kineto CUDA traces of about 10, 100, 200 and 500 MB are generated with a fixed seed in a
temporary folder (``tests/profiles/summary/synth.py``: Kineto's own layout, one field a
line, ~1 KB of trace per GPU kernel). Each measurement runs in a fresh subprocess:

- ``npulab``: ``npulab.profiles.summary.summarise`` (what the control task stores);
- ``json.load``: only the standard library reading the file, nothing computed;
- ``hta``: HolisticTraceAnalysis 0.5.0 loading the trace (one process, no pool) and
  computing the two breakdowns the summary reproduces.

Time is wall-clock and CPU (user + system) of the subprocess; memory its peak resident
set (``wait4``'s ``ru_maxrss``). The development machine has 2 cores shared with other
work, so wall time moves with the load (the report keeps the load average); CPU time
does not. Targets (issue 11): a 200 MB trace in ≤ 8 s at ≤ 150 MB peak, flat peak
memory from 10 to 500 MB. HTA is skipped above ``--hta-max-mb`` (default 200: on
500 MB it needs minutes and several GB). Usage, from the repository root:

    .venv/bin/python bench/profiles.py [--sizes 10,100,200,500] [--hta-max-mb 200]
"""

from __future__ import annotations

import argparse
import os
import platform as host_platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.common import write_report  # noqa: E402

MB = 1 << 20
TARGET = {"size_mb": 200, "seconds": 8.0, "peak_mb": 150.0}

PROGRAMS = {
    "npulab": "from npulab.profiles.summary import summarise; summarise(sys.argv[1])",
    "json.load": "import json; json.load(open(sys.argv[1]))",
    "hta": (
        "import logging, os, warnings\n"
        "warnings.simplefilter('ignore'); logging.disable(logging.WARNING)\n"
        "from hta.common.trace import Trace\n"
        "from hta.analyzers.breakdown_analysis import BreakdownAnalysis as B\n"
        "t = Trace(trace_dir=os.path.dirname(sys.argv[1]))\n"
        "t.load_traces(use_multiprocessing=False)\n"
        "B.get_temporal_breakdown(t, visualize=False)\n"
        "B.get_gpu_kernel_breakdown(t, visualize=False, include_memory_kernels=True)"
    ),
}


def measure(program: str, trace: Path) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "platform"), str(REPO)]))
    started = time.monotonic()
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys\n" + program, str(trace)],
        env=env,
        stderr=subprocess.PIPE,
    )
    _pid, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - started
    err = child.stderr.read().decode(errors="replace") if child.stderr else ""
    if child.stderr:
        child.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{program!r} failed on {trace}:\n{err[-2000:]}")
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "peak_mb": round(usage.ru_maxrss / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,200,500", help="trace sizes in MB")
    parser.add_argument("--hta-max-mb", type=int, default=200, help="skip HTA on larger traces")
    args = parser.parse_args()

    from harness.traces import write_trace

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-profiles-") as tmp:
        for size in [int(s) for s in args.sizes.split(",")]:
            folder = Path(tmp) / f"t{size}"
            folder.mkdir()
            trace = folder / "rank0.pt.trace.json"
            started = time.monotonic()
            write_trace(trace, target_bytes=size * MB, kernels_per_step=400, seed=42)
            row: dict[str, Any] = {
                "size_mb": round(trace.stat().st_size / MB, 1),
                "generate_s": round(time.monotonic() - started, 1),
            }
            for name, program in PROGRAMS.items():
                if name == "hta" and size > args.hta_max_mb:
                    row[name] = None
                    continue
                row[name] = measure(program, trace)
                row[name]["load"] = round(os.getloadavg()[0], 1)
                print(f"{size} MB {name}: {row[name]}", file=sys.stderr)
            rows.append(row)
            trace.unlink()

    target = next((r for r in rows if abs(r["size_mb"] - TARGET["size_mb"]) < 20), None)
    peaks = [r["npulab"]["peak_mb"] for r in rows]
    report = {
        "machine": f"{host_platform.machine()}, {os.cpu_count()} cores, "
        f"Python {host_platform.python_version()}",
        "rows": rows,
        "target": TARGET,
        "target_met": bool(
            target
            and target["npulab"]["wall_s"] <= TARGET["seconds"]
            and target["npulab"]["peak_mb"] <= TARGET["peak_mb"]
        ),
        "peak_spread_mb": round(max(peaks) - min(peaks), 1) if peaks else None,
    }
    write_report("profiles", report)
    print()
    print(
        "| trace | npulab wall / CPU | npulab peak | json.load wall / CPU | json.load peak "
        "| HTA wall / CPU | HTA peak |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        cells = [f"{r['size_mb']} MB"]
        for name in PROGRAMS:
            m = r[name]
            cells += (
                ["skipped", "—"]
                if m is None
                else [f"{m['wall_s']} s / {m['cpu_s']} s", f"{m['peak_mb']} MB"]
            )
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
