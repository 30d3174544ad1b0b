"""1 GB of stdout through the real supervisor (issue 27 §6), one run after the other.

    .venv/bin/python bench/stdout_flood.py [--mib 1024] [--only lines|line]

``python -m workers.run`` runs tests/fixtures/scripts/stdout_flood.py as a training run's
script, which prints MIB MiB:

- ``lines``: ~96-byte log lines (every 100th a ``loss``, every 1,000th invalid UTF-8),
  twice: stdout capture on (the default) and off (``stdout_metrics: false``); the
  difference of the two runs' CPU is what capture costs, the script's own being the same;
- ``line``: one line of MIB MiB with no newline until its end.

For each: whether the run ended cleanly (exit 0, a ``succeeded`` result, the last metric
line captured), wall seconds, CPU seconds of the supervisor and its script together, the
largest resident size of either, and the size of events.jsonl. The machine is shared:
the load average is printed with each result.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import write_report  # noqa: E402
from workers.events import iter_events  # noqa: E402

SCRIPT = ROOT / "tests" / "fixtures" / "scripts" / "stdout_flood.py"
LINE_BYTES = 96  # the script's ordinary line, newline included
LAST = "final_loss: 0.25"

# Runs the supervisor in a process of its own, so that its rusage is this run's alone.
MEASURED = """
import json, resource, subprocess, sys, time
start = time.monotonic()
code = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"code": code, "wall_s": time.monotonic() - start,
                  "cpu_s": usage.ru_utime + usage.ru_stime, "max_rss_kib": usage.ru_maxrss}))
"""


def load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def flood(work: Path, name: str, env: dict[str, str], capture: bool) -> dict:
    spec = {
        "kind": "training",
        "device_type": "cpu",
        "entry": str(SCRIPT),
        "timeout_s": 7200,
        "env": {**env, "FLOOD_LAST": LAST},
        "stdout_metrics": capture,
    }
    spec_path = work / f"{name}.json"
    spec_path.write_text(json.dumps(spec))
    run_dir = work / name
    command = [sys.executable, "-m", "workers.run", str(spec_path), "--run-dir", str(run_dir)]
    done = subprocess.run(
        [sys.executable, "-c", MEASURED, *command],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        check=True,
    )
    measured = json.loads(done.stdout)
    events_path = run_dir / "events.jsonl"
    result, last_metric, notices = None, False, []
    for event in iter_events(str(events_path)):
        if event["type"] == "result":
            result = event["status"]
        elif event["type"] == "metric" and event.get("key") == "final_loss":
            last_metric = True
        elif event["type"] == "log" and "metrics from stdout" in event.get("line", ""):
            notices.append(event["line"])
    report = {
        "run": name,
        "stdout_capture": capture,
        "exit": measured["code"],
        "result": result,
        "last_metric_captured": last_metric if capture else None,
        "wall_s": round(measured["wall_s"], 1),
        "cpu_s": round(measured["cpu_s"], 1),
        "max_rss_mib": round(measured["max_rss_kib"] / 1024, 1),
        "events_jsonl_mib": round(events_path.stat().st_size / 2**20, 1),
        "capture_notices": notices,
        "load": load(),
    }
    print(json.dumps(report), flush=True)
    # 1 GB of lines is more than a gigabyte of events: gone before the next run.
    subprocess.run(["rm", "-rf", str(run_dir)], check=True)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--only", choices=("lines", "line"))
    args = parser.parse_args()
    total = args.mib * 2**20
    reports = []
    with tempfile.TemporaryDirectory(prefix="npulab-flood-") as folder:
        work = Path(folder)
        if args.only in (None, "lines"):
            lines = {"FLOOD_LINES": str(total // LINE_BYTES)}
            on = flood(work, "lines-capture-on", lines, capture=True)
            off = flood(work, "lines-capture-off", lines, capture=False)
            reports += [on, off]
            capture_cpu = on["cpu_s"] - off["cpu_s"]
            reports.append(
                {
                    "capture_cpu_s": round(capture_cpu, 1),
                    "capture_cpu_us_a_line": round(capture_cpu / (total // LINE_BYTES) * 1e6, 2),
                }
            )
        if args.only in (None, "line"):
            reports.append(
                flood(work, "one-line", {"FLOOD_LINES": "0", "FLOOD_LONG_BYTES": str(total)}, True)
            )
    write_report("stdout_flood", {"mib": args.mib, "started": time.ctime(), "runs": reports})


if __name__ == "__main__":
    main()
