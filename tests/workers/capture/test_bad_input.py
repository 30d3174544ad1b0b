"""Issue 27 §6 through the real supervisor: a flood of stdout, and a hundred threads logging
through the platform's /mlflow/ at once. None may crash the run, wedge it or lose data.

A gigabyte does not fit a test's time: bench/stdout_flood.py pushes 1 GB through the same
paths; here a flood of lines and one 256 MiB line with no newline show that the supervisor
reads a line in bounded pieces (its memory stays below the line's size).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.paths import REPO_DIR
from tests.workers.test_run_cli import by_type
from workers.contract.events import MAX_LINE_CHARS
from workers.events import iter_events

SCRIPTS = REPO_DIR / "tests" / "fixtures" / "scripts"
LONG_BYTES = 256 * 1024 * 1024
# What the supervisor and its script may reach at most, in KiB: far below the long line,
# which a supervisor that held a whole line would hold at least twice (bytes, then text).
MAX_RSS_KIB = 200 * 1024

# Runs the supervisor and prints the largest resident size of it and its script.
MEASURED = """
import resource, subprocess, sys
code = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def test_a_flood_of_stdout_and_an_endless_line_keep_the_supervisor_bounded(
    tmp_path: Path,
) -> None:
    spec = {
        "kind": "training",
        "device_type": "cpu",
        "entry": str(SCRIPTS / "stdout_flood.py"),
        "timeout_s": 600,
        "env": {"FLOOD_LINES": "50000", "FLOOD_LONG_BYTES": str(LONG_BYTES)},
    }
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    run_dir = tmp_path / "run"
    command = [sys.executable, "-m", "workers.run", str(spec_path), "--run-dir", str(run_dir)]
    done = subprocess.run(
        [sys.executable, "-c", MEASURED, *command],
        env=dict(os.environ, PYTHONPATH=str(REPO_DIR)),
        capture_output=True,
        text=True,
        timeout=900,
    )
    code, max_rss_kib = (int(word) for word in done.stdout.split())
    events = list(iter_events(str(run_dir / "events.jsonl")))
    assert code == 0, events[-5:]
    assert events[-1]["status"] == "succeeded"
    printed = [e["line"] for e in by_type(events, "log") if e["stream"] == "stdout"]
    lines = [line for line in printed if not line.startswith("npulab: ")]  # the runner's own
    assert len(lines) == 50000 + 2
    # The endless line is kept cut, saying so; the line after it whole.
    long_line = lines[-2]
    assert long_line.startswith("0123456789abcdef")
    assert long_line.endswith(" chars cut]")
    assert len(long_line) < MAX_LINE_CHARS + 100
    assert lines[-1] == "final_loss: 0.25"
    # Invalid UTF-8 and NULs are kept as replacement characters, never an error.
    assert any("\ufffd" in line and "invalid utf-8" in line for line in lines)
    # The metrics printed between the junk are captured, the last one too.
    losses = [e for e in by_type(events, "metric") if e.get("source") == "stdout"]
    assert {e["key"] for e in losses} >= {"loss", "final_loss"}
    print(f"largest resident size: {max_rss_kib} KiB")
    assert max_rss_kib < MAX_RSS_KIB, f"{max_rss_kib} KiB"
