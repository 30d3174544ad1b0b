"""Helpers of the coverage runner tests: run a spec through ``python -m workers.run``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.paths import REPO_DIR
from workers.events import iter_events
from workers.kinds.coverage import FORWARD

# A whole run, op_db import included, on a busy 2-core machine.
RUN_DEADLINE_S = 600


class Finished:
    """A finished run: its exit code, stderr and events."""

    def __init__(self, code: int, stderr: str, events: list[dict[str, Any]]) -> None:
        self.code = code
        self.stderr = stderr
        self.events = events

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event["type"] == kind]

    @property
    def plan(self) -> dict[str, Any]:
        (plan,) = self.of("coverage_plan")
        return plan

    @property
    def rows(self) -> list[dict[str, Any]]:
        return self.of("op_result")

    @property
    def result(self) -> dict[str, Any]:
        assert self.events[-1]["type"] == "result"
        return self.events[-1]

    def row(self, op: str, dtype: str = "float32", pass_: str = FORWARD) -> dict[str, Any]:
        (found,) = [
            row for row in self.rows if (row["op"], row["dtype"], row["pass"]) == (op, dtype, pass_)
        ]
        return found


def run_spec(spec: dict[str, Any], run_dir: Path, **env: str) -> Finished:
    spec = dict({"kind": "coverage", "device_type": "cpu"}, **spec)
    spec_path = run_dir.parent / f"{run_dir.name}.spec.json"
    spec_path.write_text(json.dumps(spec))
    done = subprocess.run(
        [sys.executable, "-m", "workers.run", str(spec_path), "--run-dir", str(run_dir)],
        env=dict(os.environ, **dict({"PYTHONPATH": str(REPO_DIR)}, **env)),
        capture_output=True,
        text=True,
        timeout=RUN_DEADLINE_S,
    )
    return Finished(done.returncode, done.stderr, list(iter_events(str(run_dir / "events.jsonl"))))
