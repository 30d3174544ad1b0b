"""Event types of events.jsonl and their fields (the format is in docs/events.md).

Every event is one JSON object a line with ``type`` and ``time`` (Unix
seconds). The core types are here; a run kind adds its own in its
declaration (``Kind.event_types``). ``problem`` says what is wrong with an
event, so the platform can keep a malformed one as a visible ingest error
instead of failing its batch.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable

from workers.contract.capture import PARAM, SOURCE_FIELD, TAG

EVENTS_FILE = "events.jsonl"

# An events batch as the file's own bytes (docs/events.md#forwarding): the request body is
# events.jsonl from ``start`` to ``end`` exactly, one event a line; ``attempt``, ``start``
# and ``end`` travel as query parameters. The JSON form (an array of events) stays.
NDJSON = "application/x-ndjson"
# A runaway line (a tensor printed whole) must not become one huge event.
MAX_LINE_CHARS = 16384
# The fewest events a platform may be set to take in one batch (NPULAB_MAX_EVENTS_PER_BATCH):
# a restarted host worker sends an earlier process's spool in batches this small, not
# knowing what the claim it never saw said.
LEAST_BATCH_EVENTS = 100

LOG, METRIC, STEP, HEARTBEAT = "log", "metric", "step", "heartbeat"
# A step began; its ``step`` event follows when it ends (the live page's "running: <step>").
STEP_STARTED = "step_started"
# ``checkpoint`` is declared by the checkpoints capability (workers.contract.capabilities).
CHECKPOINT, ARTIFACT, RESULT = "checkpoint", "artifact", "result"
DIAGNOSIS = "diagnosis"

# The ``kind`` of an artifact event that announces a profiler trace (docs/profiles.md), and
# the trace formats: a Kineto/Chrome trace travels as ``*.json.gz``, a torch_npu profiler
# folder (``*_ascend_pt``) as ``*.tar.gz``.
TRACE = "trace"
KINETO, ASCEND = "kineto", "ascend"
TRACE_SUFFIXES = {KINETO: ".json.gz", ASCEND: ".tar.gz"}


def trace_format(name: str) -> str | None:
    """The format of a stored trace by its file name, or None when it is neither."""
    for fmt, suffix in TRACE_SUFFIXES.items():
        if name.endswith(suffix):
            return fmt
    return None


# Streams of a log event.
STDOUT, STDERR, RUNNER = "stdout", "stderr", "runner"

# A line one process of several printed, as its launcher relays it: ``[rank1]: text``
# (torchrun's prefix, ``[default0]:`` with its local rank; the training runner's for the
# workers msrun starts). Metrics come from rank 0's lines only.
RANK_PREFIX = re.compile(r"^\[(?:default)?rank(\d+)\]:\s?")


def rank_prefix(rank: int) -> str:
    """What goes before each line of ``rank``'s output in a run's log."""
    return f"[rank{rank}]: "


def line_event(line: bytes, loads: Callable[[Any], Any], now: float) -> dict[str, Any]:
    """The event of one line of events.jsonl (``loads``: a JSON parser).

    A line that is not a JSON object with a ``type`` (a hand-edited file, a
    stray NUL) is not dropped: it becomes a ``runner`` log line showing it.
    Bytes that are not UTF-8 are replaced, as a reader of the file would.
    """
    text = None
    try:
        event = loads(line)
    except ValueError:
        text = line.decode("utf-8", errors="replace").rstrip("\n")
        try:
            event = loads(text)
        except ValueError:
            event = None
    if isinstance(event, dict) and isinstance(event.get("type"), str):
        return event
    if text is None:
        text = line.decode("utf-8", errors="replace").rstrip("\n")
    return {"type": LOG, "time": now, "stream": RUNNER, "line": text[:MAX_LINE_CHARS]}


# Statuses of a step event.
PASS, FAIL, SKIP = "pass", "fail", "skip"

# JSON types a field may take, by name.
_CHECKS = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: type(v) is int,
    "number": lambda v: type(v) is int or (type(v) is float and math.isfinite(v)),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


class EventType:
    """An event type: each field's allowed JSON types, and which fields it must have."""

    def __init__(
        self,
        name: str,
        fields: dict[str, tuple[str, ...]] | None = None,
        required: tuple[str, ...] = (),
        help: str = "",
    ) -> None:
        self.name = name
        self.fields = dict(fields or {})
        self.required = required
        self.help = help
        for field, types in self.fields.items():
            unknown = [t for t in types if t not in _CHECKS]
            if unknown:
                raise ValueError(f"{name}.{field}: unknown JSON type(s) {unknown}")

    def problem(self, event: dict[str, Any]) -> str | None:
        """What is wrong with ``event`` as one of this type, or None."""
        for field in self.required:
            if field not in event:
                return f"a {self.name} event needs {field!r}"
        for field, types in self.fields.items():
            if field in event and not any(_CHECKS[t](event[field]) for t in types):
                return f"{self.name}.{field} must be " + " or ".join(types)
        return None


CORE_EVENT_TYPES = {
    event_type.name: event_type
    for event_type in (
        EventType(
            LOG,
            {"stream": ("string",), "line": ("string",), "rank": ("integer",)},
            ("line",),
            "a line of output (rank: the rank of a multi-process run that printed it)",
        ),
        EventType(
            METRIC,
            {
                "key": ("string",),
                "step": ("integer",),
                "value": ("number", "null"),
                "nonfinite": ("string",),
                SOURCE_FIELD: ("string",),
            },
            ("key", "step", "value"),
            "one point of a metric series",
        ),
        EventType(
            PARAM,
            {"key": ("string",), "value": ("string",), SOURCE_FIELD: ("string",)},
            ("key", "value"),
            "a parameter of the run (an MLflow param)",
        ),
        EventType(
            TAG,
            {
                "key": ("string",),
                "value": ("string",),
                "deleted": ("boolean",),
                SOURCE_FIELD: ("string",),
            },
            ("key", "value"),
            "a tag of the run (an MLflow tag); deleted: true removes it",
        ),
        EventType(
            STEP,
            {
                "name": ("string",),
                "status": ("string",),
                "seconds": ("number",),
                "detail": ("object",),
                "error": ("string", "null"),
            },
            ("name", "status"),
            "a pass/fail/skip step",
        ),
        EventType(
            STEP_STARTED,
            {"name": ("string",)},
            ("name",),
            "a step began; its step event follows when it ends",
        ),
        EventType(HEARTBEAT, help="the runner is alive"),
        EventType(
            ARTIFACT,
            {
                "name": ("string",),
                "path": ("string",),
                "bytes": ("integer",),
                "sha256": ("string",),
                "kind": ("string",),
            },
            ("name", "path", "bytes", "sha256"),
            "a file the run produced (a trace, a report)",
        ),
        EventType(
            DIAGNOSIS,
            {"diagnosis": ("object", "null"), "findings": ("array",)},
            ("findings",),
            "why the run failed (docs/diagnosis.md) and its training-health findings; "
            "just before result",
        ),
        EventType(
            RESULT,
            {
                "status": ("string",),
                "reason": ("string",),
                "summary": ("object",),
                "cause": ("string",),
            },
            ("status",),
            "how the run ended; always the last line",
        ),
    )
}
