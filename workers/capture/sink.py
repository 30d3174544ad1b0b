"""Writing captured points as metric events, with a bound on the keys one source may add."""

from __future__ import annotations

import math
import threading
import time
from typing import Iterable, Tuple

from workers.contract.capture import MAX_KEY_CHARS
from workers.contract.events import RUNNER
from workers.events import EventWriter

# (key, step, value, wall time or None for now)
Point = Tuple[str, int, float, "float | None"]
_STEP_LIMIT = 2**63 - 1


class Sink:
    """Turns one source's points into metric events, keeping its keys bounded.

    A key longer than the store takes, or one past ``max_keys``, is dropped with one notice
    on the run's log (``runner`` stream), never an exception in the reader that found it.
    """

    def __init__(self, events: EventWriter, source: str, max_keys: int) -> None:
        self.events = events
        self.source = source
        self.max_keys = max_keys
        self.keys: set = set()
        self._lock = threading.Lock()
        self._noticed: set = set()

    def notice(self, what: str, message: str) -> None:
        """Say ``message`` on the run's log once per ``what``."""
        with self._lock:
            if what in self._noticed:
                return
            self._noticed.add(what)
        self.events.log(RUNNER, f"metrics from {self.source}: {message}")

    def accept(self, key: str) -> bool:
        """Whether points of ``key`` are kept (its length and the key bound allow it)."""
        if key in self.keys:
            return True
        if not key or len(key) > MAX_KEY_CHARS or not key.isprintable():
            self.notice(
                "bad-key",
                f"a metric name that is empty, unprintable or over {MAX_KEY_CHARS} characters "
                f"was skipped ({key[:60]!r}...)",
            )
            return False
        with self._lock:
            if len(self.keys) >= self.max_keys:
                full = True
            else:
                self.keys.add(key)
                full = False
        if full:
            self.notice(
                "too-many-keys",
                f"more than {self.max_keys} distinct metric names; new names are not kept "
                f"(first one left out: {key[:80]!r})",
            )
            return False
        return True

    def write(self, points: Iterable[Point]) -> int:
        """Append the points the bound allows; how many were written. A point's own wall
        time is kept over the write's; NaN and infinity are stored as gaps."""
        written = []
        now = time.time()
        keys = self.keys
        for key, step, value, at in points:
            kept = key in keys or self.accept(key)
            if not kept or not -_STEP_LIMIT <= step <= _STEP_LIMIT:
                continue
            if at is None or not math.isfinite(at):
                at = now
            written.append((key, step, value, at))
        self.events.points(self.source, written)
        return len(written)
