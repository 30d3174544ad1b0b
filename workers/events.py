"""events.jsonl: the contract between a runner and the platform.

One JSON object a line, each with ``type`` and ``time`` (Unix seconds). The
file is also the spool: the host worker forwards it from the last offset the
platform acknowledged, so nothing written here is lost while the platform is
down. Several processes may append to one file (a launcher and its ranks):
each event is one ``write(2)`` of a whole line to an ``O_APPEND`` descriptor,
which Linux keeps whole.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
import time
from typing import Any, Iterable, Iterator, Mapping

from workers.contract.events import (
    ARTIFACT,
    CHECKPOINT,
    HEARTBEAT,
    LOG,
    MAX_LINE_CHARS,
    RESULT,
    STEP,
    line_event,
)
from workers.safefiles import open_file

# Metric keys whose JSON text is kept: a loop logs the same few keys each step,
# and a program that invents keys without end must not grow the cache with them.
KEY_CACHE_SIZE = 1024

# One encoder for every event: json.dumps with options builds a new one per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
_QUOTED_KEYS: dict[str, str] = {}
# Events a crash must not lose: written at once even by a buffering writer.
_URGENT = frozenset((CHECKPOINT, RESULT))


# A buffering writer writes at least this often, and whenever this much waits.
FLUSH_BYTES = 64 * 1024


class EventWriter:
    """Appends events to one events.jsonl; safe to share between threads.

    With ``buffer_s`` > 0 events are gathered and written together at most
    that many seconds apart (a training loop that logs every step pays one
    system call per batch, not per metric); ``flush`` writes what waits, and
    the events that matter on a crash (checkpoint, result) flush at once.
    """

    def __init__(self, path: str, buffer_s: float = 0.0, descriptor: int = -1) -> None:
        """``descriptor``: a spool opened for appending, which the writer then owns and
        closes; ``path`` is opened otherwise."""
        self.path = path
        self.buffer_s = buffer_s
        # Never through a link at the name: the host worker writes some of a run's lines.
        self._fd = (
            descriptor
            if descriptor >= 0
            else open_file(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        )
        self._lock = threading.Lock()
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._last_write = time.monotonic()

    def emit(self, type: str, **fields: Any) -> dict[str, Any]:
        event = {"type": type, "time": time.time()}
        event.update(fields)
        self._append((_ENCODER.encode(event) + "\n").encode("utf-8"), urgent=type in _URGENT)
        return event

    def points(self, source: str, points: Iterable[tuple[str, int, float, float]]) -> None:
        """Metric events of ``source`` (``(key, step, value, time)`` each, the point's own
        time), appended in one write: a reader of TensorBoard files or of printed lines finds
        points by the thousand.

        The lines are the ones ``emit`` would write, built by hand as ``metrics`` builds its
        own, with the source last: a million TensorBoard scalars read at the end of a run
        must not wait on json.dumps, and the forwarder packs exactly this text into columns
        (workers/host/packing.py).
        """
        tail = ', "source": ' + _ENCODER.encode(source) + "}\n"
        lines = [
            '{"type": "metric", "time": '
            + repr(float(at))
            + ', "key": '
            + _quoted_key(key)
            + ', "step": '
            + repr(int(step))
            + ', "value": '
            + _value_text(value)
            + tail
            for key, step, value, at in points
        ]
        if lines:
            self._append("".join(lines).encode("utf-8"), urgent=False)

    def metrics(self, step: int, values: Mapping[str, Any]) -> None:
        """Metric events of ``step``, one per key, appended together.

        The lines are the ones ``emit`` would write, built by hand: a training
        loop calls this every step, and json.dumps of each event costs more
        than the step can spare.
        """
        if not values:
            return
        head = '{"type": "metric", "time": ' + repr(time.time()) + ', "key": '
        tail = ', "step": ' + repr(int(step)) + ', "value": '
        lines = [
            head + _quoted_key(key) + tail + _value_json(value) for key, value in values.items()
        ]
        self._append("".join(lines).encode("utf-8"), urgent=False)

    def flush(self) -> None:
        with self._lock:
            self._write_pending()

    def _append(self, data: bytes, urgent: bool) -> None:
        with self._lock:
            self._pending.append(data)
            self._pending_bytes += len(data)
            if (
                self.buffer_s <= 0
                or urgent
                or self._pending_bytes >= FLUSH_BYTES
                or time.monotonic() - self._last_write >= self.buffer_s
            ):
                self._write_pending()

    def _write_pending(self) -> None:
        if self._pending and self._fd >= 0:
            # One write(2) of whole lines keeps them whole beside other writers.
            os.write(self._fd, b"".join(self._pending))
        self._pending = []
        self._pending_bytes = 0
        self._last_write = time.monotonic()

    def log(self, stream: str, line: str, rank: int | None = None) -> None:
        """A line of output; ``rank``: the rank of a multi-process run that printed it."""
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + f" [... {len(line) - MAX_LINE_CHARS} chars cut]"
        if rank is None:
            self.emit(LOG, stream=stream, line=line)
        else:
            self.emit(LOG, stream=stream, line=line, rank=rank)

    def metric(self, key: str, step: int, value: float) -> None:
        self.metrics(step, {key: value})

    def step(
        self,
        name: str,
        status: str,
        seconds: float,
        detail: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> None:
        fields: dict[str, Any] = {"name": name, "status": status, "seconds": round(seconds, 6)}
        if detail:
            fields["detail"] = detail
        if error:
            fields["error"] = error
        self.emit(STEP, **fields)

    def heartbeat(self) -> None:
        self.emit(HEARTBEAT)

    def artifact(self, name: str, path: str, kind: str = "file") -> dict[str, Any]:
        """An ``artifact`` event for a finished file: its size and SHA-256, read from disk."""
        digest = hashlib.sha256()
        size = 0
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
                size += len(block)
        return self.emit(
            ARTIFACT,
            name=name,
            path=os.path.abspath(path),
            bytes=size,
            sha256=digest.hexdigest(),
            kind=kind,
        )

    def result(
        self,
        status: str,
        reason: str = "",
        summary: dict[str, Any] | None = None,
        cause: str = "",
    ) -> None:
        fields: dict[str, Any] = {"status": status, "reason": reason, "summary": summary or {}}
        if cause:
            fields["cause"] = cause
        self.emit(RESULT, **fields)

    def close(self) -> None:
        with self._lock:
            self._write_pending()
            if self._fd >= 0:
                os.fsync(self._fd)
                os.close(self._fd)
                self._fd = -1


def _quoted_key(key: Any) -> str:
    """The JSON text of a metric key, from the cache when it is there."""
    quoted = _QUOTED_KEYS.get(key) if type(key) is str else None
    if quoted is None:
        quoted = _ENCODER.encode(key)
        # Only exact strings: 1, 1.0 and True are one dict key but three JSON texts.
        # Threads racing here may overshoot the bound by one entry each, no more.
        if type(key) is str and len(_QUOTED_KEYS) < KEY_CACHE_SIZE:
            _QUOTED_KEYS[key] = quoted
    return quoted


def _value_json(value: Any) -> str:
    """The rest of a metric line after ``"value": `` (float's repr is what json writes)."""
    return _value_text(value) + "}\n"


def _value_text(value: Any) -> str:
    """A metric's value as JSON: a finite float as json writes it (its repr), else null and
    which one it was, as JSON has no NaN or infinity."""
    value = float(value)
    if math.isfinite(value):
        return repr(value)
    return 'null, "nonfinite": "' + repr(value) + '"'


def read_at(source: str | int, offset: int, size: int) -> bytes | None:
    """Up to ``size`` bytes at ``offset`` of a file, by its path or an open descriptor
    (one the host worker holds: what becomes of the name meanwhile does not matter);
    None when there is no file at the path."""
    if isinstance(source, int):
        return os.pread(source, size, offset)
    try:
        with open(source, "rb") as handle:
            handle.seek(offset)
            return handle.read(size)
    except FileNotFoundError:
        return None


def read_batch(
    path: str | int, offset: int, max_events: int = 1000, max_bytes: int = 1 << 20
) -> tuple[list[dict[str, Any]], int]:
    """Complete events from ``offset`` on, and the offset just past the last one.

    ``path`` may be an open descriptor instead. A trailing line without its newline is
    still being written and is left for the next read. A line that is not a JSON object
    (a process killed mid-write cannot produce one, but a hand-edited file can) becomes
    a log event on the ``runner`` stream, so it is seen rather than lost.
    """
    events: list[dict[str, Any]] = []
    data = read_at(path, offset, max_bytes)
    if data is None:
        return events, offset
    end = offset
    for raw in _complete_lines(data):
        if len(events) >= max_events:
            break
        end += len(raw)
        events.append(parse_line(raw))
    if not events and len(data) >= max_bytes:
        # One line longer than a whole batch: forward it cut rather than stall.
        length = _line_length(path, offset)
        if length is not None:
            events.append(parse_line(data[:MAX_LINE_CHARS] + b"\n"))
            end = offset + length
    return events, end


def read_lines(
    path: str | int, offset: int, max_lines: int = 1000, max_bytes: int = 1 << 20
) -> tuple[bytes, int]:
    """The complete lines from ``offset`` on, as they are in the file, and the offset past them.

    ``path`` may be an open descriptor instead. At most ``max_lines`` lines and
    ``max_bytes`` bytes; a trailing line without its newline is left for the next read.
    Nothing is parsed: b"" when no line is complete (or the first is longer than
    ``max_bytes``: ``read_batch`` cuts it).
    """
    data = read_at(path, offset, max_bytes)
    if data is None:
        return b"", offset
    cut = data.rfind(b"\n") + 1
    if data.count(b"\n", 0, cut) > max_lines:
        cut = 0
        for _ in range(max_lines):
            cut = data.index(b"\n", cut) + 1
    return data[:cut], offset + cut


def iter_events(path: str) -> Iterator[dict[str, Any]]:
    """Every complete event of a file, in order (for tests and tools)."""
    offset = 0
    while True:
        events, offset_after = read_batch(path, offset)
        if not events:
            return
        yield from events
        offset = offset_after


def _complete_lines(data: bytes) -> Iterator[bytes]:
    start = 0
    while True:
        newline = data.find(b"\n", start)
        if newline < 0:
            return
        yield data[start : newline + 1]
        start = newline + 1


def parse_line(raw: bytes) -> dict[str, Any]:
    """The event of one line (a line that is not one becomes a ``runner`` log line)."""
    return line_event(raw, json.loads, time.time())


def _line_length(path: str | int, offset: int) -> int | None:
    """Bytes up to and including the next newline; None while it is unwritten."""
    length = 0
    while True:
        chunk = read_at(path, offset + length, 1 << 20)
        if not chunk:
            return None
        newline = chunk.find(b"\n")
        if newline >= 0:
            return length + newline + 1
        length += len(chunk)
