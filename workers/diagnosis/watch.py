"""The supervisor's diagnosis of a run as it runs (docs/diagnosis.md).

Every relayed line goes through the scanner as it is written, so the root cause
is ready when the run ends. The run's events.jsonl is read as it grows: any
event but a heartbeat is progress, and metric points feed the training-health
findings. ``poll`` says when the run has hung (no progress for ``hang_timeout_s`` and
its devices idle: ``workers.diagnosis.activity``) or, with ``stop_on_nan``, when its
loss went NaN. ``finish`` collects the plogs,
kernel messages and device health of a failed run and gives the ``diagnosis``
event's fields.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Callable, Iterable

from workers.contract import exits
from workers.contract.diagnosis import (
    HANG_TIMEOUT_FIELD,
    ON_HANG_FIELD,
    PROCESS_LOG_DIR,
    PROCESS_LOG_ENV,
    STOP_ON_NAN_FIELD,
)
from workers.diagnosis import activity as device_activity
from workers.diagnosis import collect
from workers.diagnosis.cann_tables import installed_tables
from workers.diagnosis.findings import HealthWatch
from workers.diagnosis.ranking import diagnose
from workers.diagnosis.scanner import Scanner

HANG, NAN = "hang", "nan"
# Silent for hang_timeout_s, but its devices compute: not a hang, the clock starts again.
BUSY = "busy"
# How long before the hang deadline the devices' activity starts being looked at (the
# supervisor polls about once a second).
LOOK_BEFORE_S = 5
STACKS_FILE = "stacks.txt"
# A run that ended this way was stopped by someone or something else: nothing to explain.
_NOT_EXPLAINED = (exits.CANCELLED, exits.TERMINATED, exits.SPEC_INVALID, exits.COMPLETED)
_READ_LIMIT = 4 * 1024 * 1024


def process_log_path(spec_env: dict[str, str], run_dir: str) -> str:
    """Where the run's plogs go: the spec's own setting wins, else the run directory."""
    return spec_env.get(PROCESS_LOG_ENV) or os.path.join(run_dir, PROCESS_LOG_DIR)


class RunWatch:
    """One run's scanner, findings and progress clock; safe to feed from several threads."""

    def __init__(
        self,
        spec: dict,
        run_dir: str,
        events_path: str,
        library_roots: Iterable[str] = (),
        clock=time.monotonic,
    ) -> None:
        self.spec = spec
        self.run_dir = run_dir
        self.events_path = events_path
        self.clock = clock
        self.started = time.time()
        self.scanner = Scanner(tables=installed_tables(), library_roots=library_roots)
        self.health = HealthWatch()
        self.hang_timeout_s = int(spec.get(HANG_TIMEOUT_FIELD) or 0)
        self.on_hang = spec.get(ON_HANG_FIELD, "fail")
        self.stop_on_nan = bool(spec.get(STOP_ON_NAN_FIELD))
        self.last_progress = clock()
        self.hung_after: float | None = None
        # The run's devices, once its processes are up (``watch_devices``).
        self.activity: device_activity.Activity = device_activity.Activity([], lambda: ())
        self._offset = 0
        self._partial = b""
        self._lines: dict[str, int] = {}
        self._lock = threading.Lock()
        # The archive of what was collected on failure, for upload ("" when none).
        self.collected = ""

    def line(self, stream: str, text: str) -> None:
        """One relayed line of the run's output."""
        with self._lock:
            number = self._lines.get(stream, 0) + 1
            self._lines[stream] = number
            self.scanner.feed(text, stream, number)
            self.last_progress = self.clock()

    def watch_devices(
        self, device_type: str, devices: list[int], groups: Callable[[], Iterable[int]]
    ) -> None:
        """Tell a silent run's idle devices from busy ones (``groups``: its process groups)."""
        self.activity = device_activity.of(device_type, devices, groups)

    def poll(self) -> str | None:
        """Read the new events; HANG or NAN when the run should be stopped or recorded, BUSY
        when it was silent for hang_timeout_s while its devices computed."""
        self._read_events()
        if self.stop_on_nan and self.health.first_nan is not None:
            return NAN
        if self.hang_timeout_s <= 0 or self.hung_after is not None:
            return None
        silent = self.clock() - self.last_progress
        if silent <= self.hang_timeout_s:
            # What ``busy`` compares against, a poll (about a second) before it is asked;
            # only near the deadline, since a look on a CPU host reads all of /proc.
            if silent > self.hang_timeout_s - LOOK_BEFORE_S:
                self.activity.look()
            return None
        if self.activity.busy():
            self.last_progress = self.clock()
            return BUSY
        self.hung_after = self.clock() - self.last_progress
        return HANG

    def _read_events(self) -> None:
        try:
            with open(self.events_path, "rb") as handle:
                handle.seek(self._offset)
                data = handle.read(_READ_LIMIT)
        except OSError:
            return
        self._offset += len(data)
        data = self._partial + data
        cut = data.rfind(b"\n") + 1
        self._partial = data[cut:]
        for raw in data[:cut].splitlines():
            if b'"heartbeat"' in raw[:40]:
                continue
            self.last_progress = self.clock()
            if b'"metric"' in raw[:40]:
                try:
                    self.health.event(json.loads(raw))
                except ValueError:
                    continue

    def capture_stacks(self, groups: Iterable[int]) -> str:
        """Every process's Python stack (py-spy, where installed) into diagnosis/stacks.txt."""
        pids = collect.processes_in_groups(groups)
        text = collect.python_stacks(pids)
        if not text:
            text = (
                "py-spy is not installed on this host (pip install py-spy, the worker's "
                f"optional dependency); processes of the run: {pids}\n"
            )
        return collect.write(self.run_dir, STACKS_FILE, text)

    def finish(self, status: str, cause: str, devices: Iterable[int]) -> dict | None:
        """The diagnosis event's fields, or None when there is nothing to say."""
        findings = list(self.health.findings)
        if status == exits.SUCCEEDED or cause in _NOT_EXPLAINED:
            return {"diagnosis": None, "findings": findings} if findings else None
        plogs = process_log_path(self.spec.get("env") or {}, self.run_dir)
        collect.collect_on_failure(self.run_dir, plogs, self.started, devices)
        if os.path.isdir(plogs):
            self.scanner.scan_path(plogs)
        self.collected = collect.pack(self.run_dir, plogs)
        found = diagnose(self.scanner.hits, findings)
        if cause in (exits.HANG, exits.HANG_REQUEUED) and (
            found is None or found["category"] not in ("hccl-timeout", "network")
        ):
            found = self._hang(findings)
        elif found is None and cause == exits.NAN_LOSS:
            found = self._nan(findings)
        if found is None:
            return {"diagnosis": None, "findings": findings} if findings else None
        return {"diagnosis": found, "findings": findings}

    def _hang(self, findings: list[dict]) -> dict:
        stacks = os.path.join(collect.COLLECTED_DIR, STACKS_FILE)
        used = self.activity.last_pct
        idle = (
            f"its devices idle ({used:.0f} % utilisation)"
            if used is not None
            else "its devices' activity unknown"
        )
        line = f"no metric, log or checkpoint event for {self.hang_timeout_s} s, {idle}"
        return {
            "category": "hang",
            "codes": [],
            "root_code": None,
            "line": line,
            "fix": "Read the stacks captured in diagnosis/stacks.txt: a rank stuck in a "
            "collective waits for a peer that failed or never came; raise hang_timeout_s "
            "for steps that are legitimately silent.",
            "blame": "unknown",
            "rule": "hang",
            "meaning": "The run made no progress for hang_timeout_s.",
            "source": "npulab hang detection",
            "evidence": [{"file": stacks, "line_no": 1, "text": line}],
            "ranks": None,
            "findings": findings,
        }

    def _nan(self, findings: list[dict]) -> dict:
        first = self.health.first_nan or {}
        line = first.get("message", "a tracked loss went NaN/Inf")
        return {
            "category": "numeric-overflow",
            "codes": [],
            "root_code": None,
            "line": line,
            "fix": "Lower the learning rate, use bf16 or gradient clipping, and check the data "
            "of that step; stop_on_nan ended the run there.",
            "blame": "user-code",
            "rule": "nan-loss",
            "meaning": "A tracked loss became NaN or Inf.",
            "source": "npulab training-health findings",
            "evidence": [{"file": "metrics", "line_no": int(first.get("step", 0)), "text": line}],
            "ranks": None,
            "findings": findings,
        }
