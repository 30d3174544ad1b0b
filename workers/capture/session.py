"""Everything the supervisor captures for one run, started and stopped together.

The supervisor feeds every line the script prints to ``line``; recognising happens on a
thread of its own behind a bounded queue, so a slow pattern can never hold the pipe (and
with it the script). The pipe's reader only appends to a deque, which takes no lock;
the scanner takes at most SCAN_CPU_SHARE of a core while the script runs, as it shares the
interpreter with that reader (a flood of output scanned at full speed slowed the script
threefold). When the queue is full the oldest lines go unscanned, with a notice, so the
last lines (a run's final metrics) always are.
"""

from __future__ import annotations

import collections
import os
import secrets
import threading
import time
from typing import Any

from workers.capture.mlflow import EventsStore, MlflowServer
from workers.capture.sink import Sink
from workers.capture.stdout import Recogniser
from workers.capture.tensorboard import TensorBoardReader
from workers.contract import script_env
from workers.contract.capture import (
    MAX_CAPTURED_KEYS,
    MAX_STDOUT_KEYS,
    METRIC_PATTERNS,
    MLFLOW_EXPERIMENT_NAME,
    MLFLOW_RUN_ID,
    MLFLOW_TRACKING_TOKEN,
    MLFLOW_TRACKING_URI,
    STDOUT,
    STDOUT_METRICS,
    TENSORBOARD,
    TENSORBOARD_DIRS,
)
from workers.events import EventWriter

QUEUE_LINES = 20000
# 1,000 metric lines a second take about 2 % (docs/benchmarks.md): scanned whole. A flood
# is scanned in part, and slows the script by about a tenth, not threefold.
SCAN_CPU_SHARE = 0.05
# Lines scanned between two looks at the scanner's CPU, and the window it is measured over.
SCAN_BATCH = 200
SCAN_WINDOW_S = 5.0
# How long the scanner waits for a line before it looks again.
SCAN_IDLE_S = 0.05
EXPERIMENT = "npulab"


class Capture:
    """The MLflow API, the TensorBoard reader and the stdout recogniser of one run."""

    def __init__(self, spec: dict[str, Any], run_dir: str, events: EventWriter) -> None:
        self.spec = spec
        self.run_dir = run_dir
        self.events = events
        run_id = os.environ.get(script_env.RUN_ID)
        name = f"npulab-{run_id}" if run_id else "npulab"
        self.mlflow_store = EventsStore(events, run_dir, EXPERIMENT, name)
        # The script's own: its environment carries it, no other run's can read it.
        self.mlflow_token = secrets.token_urlsafe(24)
        self.mlflow = MlflowServer(self.mlflow_store, token=self.mlflow_token)
        self.tensorboard = TensorBoardReader(
            self._tensorboard_dirs(), Sink(events, TENSORBOARD, MAX_CAPTURED_KEYS)
        )
        self.stdout_sink = Sink(events, STDOUT, MAX_STDOUT_KEYS)
        self.recogniser: Recogniser | None = None
        if spec.get(STDOUT_METRICS, True):
            self.recogniser = Recogniser(spec.get(METRIC_PATTERNS) or None)
        self._lines: collections.deque = collections.deque(maxlen=QUEUE_LINES)
        self._scanner = threading.Thread(target=self._scan, name="stdout-metrics", daemon=True)
        self._fed: dict[str, int] = {}
        self._scanned = 0
        self._stopping = threading.Event()

    def _tensorboard_dirs(self) -> list:
        named = self.spec.get(TENSORBOARD_DIRS) or []
        if not named:
            workdir = self.spec.get("workdir") or ""
            return [os.path.join(self.run_dir, workdir) if workdir else self.run_dir]
        return [os.path.join(self.run_dir, item) for item in named]

    def start(self) -> None:
        self.mlflow.start()
        self.tensorboard.start()
        if self.recogniser is not None:
            self._scanner.start()

    def environment(self) -> dict[str, str]:
        """What the script's environment gets, for MLflow's client to log here. A spec that
        names a tracking server of its own keeps it, and this run's token stays here."""
        if MLFLOW_TRACKING_URI in (self.spec.get("env") or {}):
            return {}
        return {
            MLFLOW_TRACKING_URI: self.mlflow.url,
            MLFLOW_TRACKING_TOKEN: self.mlflow_token,
            MLFLOW_EXPERIMENT_NAME: EXPERIMENT,
            MLFLOW_RUN_ID: self.mlflow_store.run_id,
        }

    def line(self, stream: str, text: str) -> None:
        """A line the script printed; never blocks (a deque's append takes no lock)."""
        if self.recogniser is None or self._stopping.is_set():
            return  # after the end: a grandchild still printing
        self._lines.append((stream, text))  # full: the oldest line falls out, unscanned
        # One pump thread a stream: each count has one writer.
        self._fed[stream] = self._fed.get(stream, 0) + 1

    def _scan(self) -> None:
        assert self.recogniser is not None
        cpu, wall = time.thread_time(), time.monotonic()
        while True:
            try:
                stream, text = self._lines.popleft()
            except IndexError:
                if self._stopping.is_set() and not self._lines:
                    return
                self._stopping.wait(SCAN_IDLE_S)
                continue
            try:
                self.stdout_sink.write(self.recogniser.feed(text, stream))
            except Exception as exc:  # a line no shape foresaw must not end the capture
                self.stdout_sink.notice("error", f"a line was not scanned: {exc!r}")
            self._scanned += 1
            if self._scanned % SCAN_BATCH or self._stopping.is_set():
                continue
            used, elapsed = time.thread_time() - cpu, time.monotonic() - wall
            owed = used / SCAN_CPU_SHARE - elapsed
            if owed > 0:
                time.sleep(min(owed, 1.0))
            if elapsed > SCAN_WINDOW_S:
                cpu, wall = time.thread_time(), time.monotonic()

    def stop(self) -> None:
        """Once the script has ended: read what is left, then close the MLflow API."""
        if self.recogniser is not None:
            self._stopping.set()  # what is queued is scanned, at full speed now
            self._scanner.join()
            skipped = sum(self._fed.values()) - self._scanned
            if skipped > 0:
                self.stdout_sink.notice(
                    "behind",
                    f"the script printed faster than lines could be scanned: {skipped} "
                    "lines were not scanned (their log lines are kept)",
                )
        self.tensorboard.stop()
        self.mlflow_store.send_artifacts()
        self.mlflow.stop()
