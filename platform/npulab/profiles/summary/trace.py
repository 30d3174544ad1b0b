"""Chrome / Kineto trace files read one event at a time, in bounded memory.

A trace is a JSON object whose ``traceEvents`` array holds the events (Kineto,
``export_chrome_trace``) or a bare JSON array of events (torch_npu's
``trace_view.json``). Either may be gzipped. Loading a 500 MB trace with
``json.load`` takes gigabytes, so the file is read in chunks and each event is
decoded on its own with ``json.JSONDecoder.raw_decode`` (the C scanner): memory
is one chunk plus the largest single event, whatever the size of the file.

Runs of whole events are decoded in one call where that is safe (``_batch``), with
orjson when it is installed (a platform dependency), which is several times faster.

The other top-level keys (``deviceProperties``, ``distributedInfo``,
``schemaVersion``, ``traceName`` ...) are small; they are decoded whole into
``Trace.meta`` as the reader passes them (before or after the events).
"""

from __future__ import annotations

import gzip
import io
import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from npulab.core.text import error_text

try:  # a dependency of the platform; the standard library does the same, slower
    from orjson import loads as _loads
except ImportError:  # pragma: no cover
    from json import loads as _loads

CHUNK_CHARS = 256 << 10
# A single event (or top-level value) larger than this is refused: it is far
# beyond anything a profiler writes and would defeat the bounded memory.
MAX_VALUE_CHARS = 64 << 20

_SKIP = re.compile(r"[\s,]*")
# Between two events of the array: "}" then "," then "{" (whitespace allowed).
_SEP = re.compile(r"\}\s*,\s*(?=\{)")
_TAIL = 64 << 10
_WS = re.compile(r"\s*")
_NUMERIC_FIELDS = ("ts", "dur")
_TRACE_SUFFIXES = (".json", ".json.gz")


class TraceError(ValueError):
    """The file is not a trace this reader understands (the message says why)."""


def _to_float(value: Any) -> Any:
    # torch_npu writes timestamps as strings ("1723545784535521.354") to keep
    # their nanoseconds; everything downstream wants numbers in microseconds.
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return value


def _normalise(event: dict) -> dict:
    for key in _NUMERIC_FIELDS:
        value = event.get(key)
        if value is not None and not isinstance(value, (int, float)):
            event[key] = _to_float(value)
    return event


class _Scanner:
    """A growing window on a text stream, consumed from the front."""

    def __init__(self, stream: io.TextIOBase, name: str) -> None:
        self.stream = stream
        self.name = name
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.consumed = 0  # characters dropped from the front of buf
        self.decoder = json.JSONDecoder()

    def fill(self) -> bool:
        if self.eof:
            return False
        chunk = self.stream.read(CHUNK_CHARS)
        if not chunk:
            self.eof = True
            return False
        if self.pos:
            self.consumed += self.pos
            self.buf = self.buf[self.pos :] + chunk
            self.pos = 0
        else:
            self.buf += chunk
        return True

    def error(self, message: str) -> TraceError:
        return TraceError(f"{self.name}: {message} (at character {self.consumed + self.pos})")

    def skip(self, pattern: re.Pattern[str] = _WS) -> str:
        """Skip what the pattern matches; return the next character ('' at the end)."""
        while True:
            self.pos = pattern.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.fill():
                return ""

    def expect(self, char: str) -> None:
        if self.skip() != char:
            found = self.buf[self.pos : self.pos + 20] or "the end of the file"
            raise self.error(f"expected {char!r}, found {found!r}")
        self.pos += 1

    def value(self) -> Any:
        """Decode the JSON value that starts at pos, reading more text as needed."""
        self.skip()
        while True:
            try:
                obj, end = self.decoder.raw_decode(self.buf, self.pos)
            except RecursionError:
                raise self.error("a value nested too deeply") from None
            except json.JSONDecodeError as exc:
                if len(self.buf) - self.pos > MAX_VALUE_CHARS:
                    raise self.error(
                        f"invalid JSON or a value over {MAX_VALUE_CHARS} characters: {exc.msg}"
                    ) from None
                if not self.fill():
                    raise self.error(f"invalid JSON: {exc.msg}") from None
                continue
            # A bare number or literal may have been cut by the chunk boundary.
            if end >= len(self.buf) and not isinstance(obj, (dict, list, str)) and self.fill():
                continue
            self.pos = end
            return obj


def _batch(buf: str, pos: int) -> tuple[list | None, int]:
    """The events from pos to the last complete one in buf, decoded at once; or (None, cut).

    The cut is the last ``}`` followed by ``, {`` in the buffer's tail. A cut inside a
    string or a nested object leaves unbalanced text, which no JSON parser accepts, so a
    batch that decodes is exactly the events before the cut; when it does not (or orjson
    refuses what the standard library accepts: NaN, huge integers) the caller decodes
    those events one at a time with the standard library.
    """
    tail = max(pos, len(buf) - _TAIL)
    cut = -1
    for match in _SEP.finditer(buf, tail):
        cut = match.start() + 1
    if cut <= pos:
        return None, pos
    try:
        batch = _loads("[" + buf[pos:cut] + "]")
    except ValueError:
        return None, cut
    return (batch, cut) if isinstance(batch, list) else (None, cut)


class Trace:
    """One trace file. Iterate ``events()`` once; ``meta`` is complete after it."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.meta: dict[str, Any] = {}
        self.form = ""  # "object" or "array", known once reading starts

    @property
    def rank(self) -> int | None:
        info = self.meta.get("distributedInfo")
        if isinstance(info, dict):
            try:
                return int(info.get("rank"))
            except (TypeError, ValueError):
                return None
        return _ascend_rank(self.path)

    def _open(self) -> io.TextIOBase:
        try:
            with open(self.path, "rb") as raw:
                magic = raw.read(2)
        except OSError as exc:
            raise TraceError(f"{self.path.name}: cannot read: {error_text(exc)}") from None
        if magic == b"\x1f\x8b":
            return io.TextIOWrapper(gzip.open(self.path, "rb"), encoding="utf-8", errors="replace")
        return open(self.path, encoding="utf-8", errors="replace")

    def events(self) -> Iterator[dict]:
        try:
            with self._open() as stream:
                yield from self._events(_Scanner(stream, self.path.name))
        except (OSError, EOFError, zlib.error) as exc:  # gzip CRC / truncation, read errors
            raise TraceError(f"{self.path.name}: cannot read: {error_text(exc)}") from None

    def _events(self, sc: _Scanner) -> Iterator[dict]:
        first = sc.skip()
        if first == "[":
            self.form = "array"
            sc.pos += 1
            yield from self._array(sc)
        elif first == "{":
            self.form = "object"
            sc.pos += 1
            yield from self._object(sc)
        elif first == "":
            raise sc.error("empty file, not a trace")
        else:
            raise sc.error("not a JSON trace (expected '{' or '[')")
        if sc.skip() != "":
            raise sc.error("unexpected text after the trace")

    def _array(self, sc: _Scanner) -> Iterator[dict]:
        until = 0  # up to this absolute position, decode one event at a time (a batch failed there)
        while True:
            char = sc.skip(_SKIP)
            if char == "]":
                sc.pos += 1
                return
            if char == "":
                raise sc.error("the trace ends inside its event array (truncated?)")
            if sc.consumed + sc.pos >= until:
                batch, cut = _batch(sc.buf, sc.pos)
                if batch is not None:
                    sc.pos = cut
                    for event in batch:
                        if isinstance(event, dict):
                            yield _normalise(event)
                    if sc.pos >= len(sc.buf) - 1:
                        sc.fill()
                    continue
                until = sc.consumed + cut
            event = sc.value()
            if isinstance(event, dict):
                yield _normalise(event)

    def _object(self, sc: _Scanner) -> Iterator[dict]:
        while True:
            char = sc.skip(_SKIP)
            if char == "}":
                sc.pos += 1
                return
            if char != '"':
                raise sc.error(
                    "expected a key in the trace object"
                    if char
                    else "the trace ends early (truncated?)"
                )
            key = sc.value()
            sc.expect(":")
            if key == "traceEvents" and sc.skip() == "[":
                sc.pos += 1
                yield from self._array(sc)
            else:
                self.meta[key] = sc.value()


def trace_files(path: str | Path) -> list[Path]:
    """The trace files a path names: a file, an ascend_pt folder, or a folder of them.

    A folder is an ascend_pt output (``ASCEND_PROFILER_OUTPUT/trace_view.json``),
    a folder of ascend_pt outputs (one per rank), or a folder of trace files
    (``*.json`` / ``*.json.gz``, one per rank, as HTA reads them).
    """
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise TraceError(f"{p.name}: no such file or folder")
    own = _ascend_trace(p)
    if own:
        return [own]
    found = sorted(t for t in (_ascend_trace(c) for c in p.iterdir() if c.is_dir()) if t)
    if not found:
        found = sorted(c for c in p.iterdir() if c.is_file() and c.name.endswith(_TRACE_SUFFIXES))
    if not found:
        raise TraceError(f"{p}: no trace in this folder (no trace_view.json, *.json or *.json.gz)")
    return found


def _ascend_trace(folder: Path) -> Path | None:
    candidate = folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    return candidate if candidate.is_file() else None


# torch_npu's profiler_info_{rank}.json is a few kB; anything far larger is not one.
_PROFILER_INFO_MAX_BYTES = 1024 * 1024


def _ascend_rank(path: Path) -> int | None:
    """The rank torch_npu wrote beside a trace_view.json (``rank_id`` of the *_ascend_pt
    folder's profiler_info_{rank}.json; -1 or none in a single-card run)."""
    output = ascend_output(path)
    if output is None:
        return None
    for info in sorted(output.parent.glob("profiler_info*.json")):
        try:
            if info.stat().st_size > _PROFILER_INFO_MAX_BYTES:
                continue
            found = json.loads(info.read_text(encoding="utf-8")).get("rank_id")
        except (OSError, ValueError, AttributeError):
            continue
        if type(found) is int and found >= 0:
            return found
    return None


def ascend_output(path: str | Path) -> Path | None:
    """The ASCEND_PROFILER_OUTPUT folder a trace file belongs to, if it is one."""
    p = Path(path)
    if p.name == "trace_view.json" and p.parent.name == "ASCEND_PROFILER_OUTPUT":
        return p.parent
    return None


def iter_events(path: str | Path) -> Iterator[dict]:
    """Every event of the trace(s) at ``path``, one dict at a time, ``ts``/``dur`` as numbers.

    Raises ``TraceError`` (a ``ValueError``) with a message naming the file
    for a missing, unreadable or malformed trace.
    """
    for file in trace_files(path):
        yield from Trace(file).events()
