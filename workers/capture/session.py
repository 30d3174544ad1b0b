"""Everything the supervisor captures for one run, started and stopped together.

The supervisor feeds every line the script prints to ``line``; recognising happens on a
thread of its own behind a bounded queue, so a slow pattern can never hold the pipe (and
with it the script): when the queue is full, lines go unscanned with a notice.
"""

from __future__ import annotations

import os
import queue
import threading
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
    MLFLOW_TRACKING_URI,
    STDOUT,
    STDOUT_METRICS,
    TENSORBOARD,
    TENSORBOARD_DIRS,
)
from workers.events import EventWriter

QUEUE_LINES = 20000
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
        self.mlflow = MlflowServer(self.mlflow_store)
        self.tensorboard = TensorBoardReader(
            self._tensorboard_dirs(), Sink(events, TENSORBOARD, MAX_CAPTURED_KEYS)
        )
        self.stdout_sink = Sink(events, STDOUT, MAX_STDOUT_KEYS)
        self.recogniser: Recogniser | None = None
        if spec.get(STDOUT_METRICS, True):
            self.recogniser = Recogniser(spec.get(METRIC_PATTERNS) or None)
        self._lines: queue.Queue = queue.Queue(maxsize=QUEUE_LINES)
        self._scanner = threading.Thread(target=self._scan, name="stdout-metrics", daemon=True)
        self._skipped = 0

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
        """What the script's environment gets, for MLflow's client to log here."""
        return {
            MLFLOW_TRACKING_URI: self.mlflow.url,
            MLFLOW_EXPERIMENT_NAME: EXPERIMENT,
            MLFLOW_RUN_ID: self.mlflow_store.run_id,
        }

    def line(self, stream: str, text: str) -> None:
        """A line the script printed; never blocks."""
        if self.recogniser is None:
            return
        try:
            self._lines.put_nowait((stream, text))
        except queue.Full:
            self._skipped += 1

    def _scan(self) -> None:
        assert self.recogniser is not None
        while True:
            item = self._lines.get()
            if item is None:
                return
            try:
                self.stdout_sink.write(self.recogniser.feed(item[1], item[0]))
            except Exception as exc:  # a line no shape foresaw must not end the capture
                self.stdout_sink.notice("error", f"a line was not scanned: {exc!r}")

    def stop(self) -> None:
        """Once the script has ended: read what is left, then close the MLflow API."""
        if self.recogniser is not None:
            self._lines.put(None)
            self._scanner.join()
            if self._skipped:
                self.stdout_sink.notice(
                    "behind",
                    f"the script printed faster than lines could be scanned: {self._skipped} "
                    "lines were not scanned (their log lines are kept)",
                )
        self.tensorboard.stop()
        self.mlflow_store.send_artifacts()
        self.mlflow.stop()
