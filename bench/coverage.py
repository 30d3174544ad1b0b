"""Coverage runs: the full CPU op matrix through the isolating runner vs a bare loop.

Two measurements of the same work, every OpInfo op × every dtype it claims
on the CPU, first sample, the op run and compared with its float64 reference
(issue 9):

- runner: ``python -m workers.run`` on an ``op_set: opinfo`` spec, end to end
  (supervisor, op_db import, fork server, children in batches, one event per
  row); peak memory of the whole tree, sampled from /proc (the largest single
  process, and the sum, which counts pages the children share with the fork
  server once per child), and ``RUSAGE_CHILDREN``'s ru_maxrss afterwards;
- bare: one process, a plain loop over the same cases with the same
  ``execute`` function (same sample, same reference, same comparison), no
  child processes, no events, no isolation; its import time is reported
  apart from the loop.

Targets (issue 9): the runner within 3× the bare loop, and the full matrix
in under 2 minutes on the 2-core development machine. Prints a markdown table
and keeps bench/results/coverage.json. Usage, from the repository root:

    .venv/bin/python bench/coverage.py
"""

from __future__ import annotations

import argparse
import json
import os
import platform as host_platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.common import write_report  # noqa: E402

TARGETS = {"ratio_to_bare": 3.0, "runner_wall_s": 120.0}
SAMPLE_EVERY_S = 0.2


def bare() -> dict[str, Any]:
    """The loop without isolation, in this process (run as ``--bare`` in a fresh one)."""
    started = time.perf_counter()
    import torch

    from workers.kinds.coverage import opinfo
    from workers.kinds.coverage.cases import plan_opinfo
    from workers.kinds.coverage.execute import Environment, execute

    op_db = opinfo.load_op_db()
    opinfo.skip_test_lookup()  # as the runner does
    cases = plan_opinfo(torch, op_db, "cpu", [], backward=False)
    imported = time.perf_counter()
    env = Environment(torch, torch.device("cpu"), lambda: None, 0, False, lambda *args: None)
    statuses: dict[str, int] = {}
    for case in cases:
        status = execute(case, env)["status"]
        statuses[status] = statuses.get(status, 0) + 1
    loop_s = time.perf_counter() - imported
    return {
        "pairs": len(cases),
        "import_s": round(imported - started, 2),
        "loop_s": round(loop_s, 2),
        "pairs_per_s": round(len(cases) / loop_s, 1),
        "statuses": statuses,
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def _tree_rss_kb(root: int) -> list[int]:
    """VmRSS of ``root`` and all its descendants, from /proc."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parents[int(entry)] = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in tree:
                tree.add(pid)
                frontier.append(pid)
    sizes = []
    for pid in tree:
        try:
            with open(f"/proc/{pid}/status") as handle:
                for line in handle:
                    if line.startswith("VmRSS:"):
                        sizes.append(int(line.split()[1]))
        except OSError:
            continue
    return sizes


def runner() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="npulab-bench-coverage-") as scratch:
        spec = Path(scratch) / "spec.json"
        spec.write_text(json.dumps({"kind": "coverage", "device_type": "cpu", "op_set": "opinfo"}))
        run_dir = Path(scratch) / "run"
        started = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "workers.run", str(spec), "--run-dir", str(run_dir)],
            cwd=REPO,
            env=dict(os.environ, PYTHONPATH=str(REPO)),
            stdout=subprocess.DEVNULL,
        )
        peaks = {"max_process_kb": 0, "max_sum_kb": 0}
        done = threading.Event()

        def sample() -> None:
            while not done.wait(SAMPLE_EVERY_S):
                sizes = _tree_rss_kb(process.pid)
                if sizes:
                    peaks["max_process_kb"] = max(peaks["max_process_kb"], max(sizes))
                    peaks["max_sum_kb"] = max(peaks["max_sum_kb"], sum(sizes))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        code = process.wait()
        wall = time.perf_counter() - started
        done.set()
        sampler.join()
        events = [json.loads(line) for line in (run_dir / "events.jsonl").open()]
    result = events[-1]
    summary = result["summary"]
    rows = sum(1 for event in events if event["type"] == "op_result")
    return {
        "exit_code": code,
        "status": result["status"],
        "pairs": summary["total"],
        "rows": rows,
        "wall_s": round(wall, 2),
        "runner_s": summary["seconds"],
        "pairs_per_s": round(summary["total"] / wall, 1),
        "statuses": {
            key: summary[key]
            for key in ("pass", "fallback", "mismatch", "unsupported", "error", "crash", "timeout")
        },
        "max_process_rss_mb": round(peaks["max_process_kb"] / 1024, 1),
        "max_tree_rss_sum_mb": round(peaks["max_sum_kb"] / 1024, 1),
        "children_ru_maxrss_mb": round(
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare:
        print(json.dumps(bare()))
        return 0
    measured_runner = runner()
    done = subprocess.run(
        [sys.executable, __file__, "--bare"],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        check=True,
    )
    measured_bare = json.loads(done.stdout.strip().splitlines()[-1])
    ratio = measured_runner["wall_s"] / measured_bare["loop_s"]
    report = {
        "machine": f"{host_platform.machine()}, {os.cpu_count()} cores",
        "python": sys.version.split()[0],
        "runner": measured_runner,
        "bare": measured_bare,
        "ratio_to_bare": round(ratio, 2),
        "targets": TARGETS,
        "met": {
            "ratio_to_bare": ratio < TARGETS["ratio_to_bare"],
            "runner_wall_s": measured_runner["wall_s"] < TARGETS["runner_wall_s"],
        },
    }
    write_report("coverage", report)
    r, b = measured_runner, measured_bare
    print()
    print("| | pairs | wall s | pairs/s | peak RSS MB |")
    print("| --- | ---: | ---: | ---: | ---: |")
    print(
        f"| runner (isolated, end to end) | {r['pairs']} | {r['wall_s']} | {r['pairs_per_s']} | "
        f"{r['max_process_rss_mb']} largest process, {r['max_tree_rss_sum_mb']} tree sum, "
        f"{r['children_ru_maxrss_mb']} ru_maxrss |"
    )
    print(
        f"| bare loop (one process, loop only; +{b['import_s']} s import) | {b['pairs']} | "
        f"{b['loop_s']} | {b['pairs_per_s']} | {b['max_rss_mb']} |"
    )
    print(f"| runner / bare | | {ratio:.2f}× | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
