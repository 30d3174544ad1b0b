"""Turning events.jsonl batches into rows (the format is in docs/events.md).

The core types are handled here; any other type belongs to an app (a run
kind, a store) that registers a handler for it with ``register_handler``.
Every event of a known type is checked against its declaration in the
contract first: one that does not fit is kept as a visible log line saying
what was wrong, and the rest of the batch is applied.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from math import isfinite
from typing import Any

from npulab.core.text import storable, storable_json
from npulab.runs.logview import FIRST_ERROR
from npulab.runs.models import Run, RunAttempt, RunEvent
from npulab.series import chunks
from npulab.series.blocks import Block
from npulab.series.chunks import Points
from npulab.series.ingest import Point, insert_columns
from npulab.series.owners import Owner
from npulab.series.rollups import LOWEST_STEP
from workers.contract import events as contract_events
from workers.contract import kinds as contract_kinds
from workers.contract.capture import SOURCE_FIELD, SOURCES, TRACK
from workers.contract.diagnosis import CATEGORIES
from workers.contract.redact import REDACTED, is_secret_name, redact_text

MAX_TYPE_CHARS = 32
MAX_KEY_CHARS = 200
_STEP_MIN, _STEP_MAX = LOWEST_STEP, 2**63 - 1
# Tokens of this platform, should a user's program print one.
_TOKEN = re.compile(r"\bnp[lh]_[A-Za-z0-9_-]{20,}")
# Events that only prove liveness; storing them would only cost.
_NOT_STORED = {contract_events.HEARTBEAT}
_FIRST_ERROR = re.compile(FIRST_ERROR)


class MalformedEvent(ValueError):
    """Raised by a handler for an event its declaration's types cannot reject (a bad status)."""


class Batch:
    """One events batch of a run while it is stored: what handlers may use.

    Metric points are gathered and written together at the end (``points``,
    a list of each key's points as the JSON form gives them, ``add_columns``
    for a block of them); a handler whose event changes the points already
    stored (a resume cuts them back) calls ``flush_points`` first, so the
    points before it in the batch are in.
    A handler that stores many rows gathers them with ``pending`` and writes
    them all at once when the batch ends.
    """

    def __init__(self, run: Run, now: datetime) -> None:
        self.run = run
        self.now = now
        self.points: dict[str, list[Point]] = {}
        # Points of the other sources (workers.contract.capture), by source and key.
        self.sourced: dict[str, dict[str, list[Point]]] = {}
        # Each (source, key)'s points as columns so far, in the order they came.
        self._columns: dict[tuple[str, str], list[Points]] = {}
        self._pending: dict[str, tuple[list[Any], Callable[[Run, list[Any]], None]]] = {}
        # The step running at the batch's end: (name, began) after a step_started, ("", None)
        # after a step ended; None when the batch says nothing of steps.
        self.current_step: tuple[str, datetime | None] | None = None

    def add_columns(self, key: str, points: Points, source: str = TRACK) -> None:
        """Add a block of ``key``'s points, after those of the key that came before it."""
        parts = self._columns.setdefault((source, key), [])
        listed = self.points if source == TRACK else self.sourced.get(source, {})
        before = listed.pop(key, None)
        if before:
            parts.append(chunks.columns(before))
        parts.append(points)

    def flush_points(self) -> None:
        for source, listed in ((TRACK, self.points), *self.sourced.items()):
            for key, before in listed.items():
                if before:
                    self._columns.setdefault((source, key), []).append(chunks.columns(before))
        by_source: dict[str, dict[str, Points]] = {}
        for (source, key), parts in self._columns.items():
            by_source.setdefault(source, {})[key] = chunks.joined(parts)
        for source, found in by_source.items():
            insert_columns(Owner.of_run(self.run.pk, source), found, attempt=self.run.attempt)
        self.points = {}
        self.sourced = {}
        self._columns = {}

    def pending(self, name: str, flush: Callable[[Run, list[Any]], None]) -> list[Any]:
        """The batch's list ``name``; ``flush(run, items)`` writes it once, after the last event."""
        if name not in self._pending:
            self._pending[name] = ([], flush)
        return self._pending[name][0]

    def finish(self) -> None:
        self.flush_points()
        for items, flush in self._pending.values():
            if items:
                flush(self.run, items)
        self._pending = {}
        if self.current_step is not None:
            name, began = self.current_step
            RunAttempt.objects.filter(run=self.run, number=self.run.attempt).update(
                current_step=name, current_step_started_at=began
            )


# Returns True when it stored the event itself (in a table of its own), so
# no RunEvent row is written for it.
Handler = Callable[[Batch, dict[str, Any]], bool | None]
_handlers: dict[str, Handler] = {}


class HandlerConflict(ValueError):
    """An event type has a handler already, or is declared nowhere."""


def register_handler(event_type: str, handler: Handler) -> None:
    """Let ``handler`` act on every event of ``event_type`` (called from AppConfig.ready)."""
    if event_type not in contract_kinds.event_types():
        raise HandlerConflict(f"event type {event_type!r} is declared by no kind nor the core")
    if _handlers.get(event_type, handler) is not handler:
        raise HandlerConflict(f"event type {event_type!r} has a handler already")
    _handlers[event_type] = handler


def store_events(run: Run, events: list[Any], now: datetime) -> dict[str, Any] | None:
    """Bulk-insert one batch; returns the batch's result event (without type/time), if any.

    Nothing is dropped silently: an event that does not fit the contract is
    stored as a ``runner`` log line saying what was wrong with it.
    """
    secrets = _secret_values(run)
    declared = contract_kinds.event_types()
    owners = contract_kinds.event_type_owners()
    needs = contract_kinds.event_type_capabilities()
    run_kind = contract_kinds.get(run.kind)
    batch = Batch(run, now)
    rows: list[RunEvent] = []
    result = None
    stamp = now.timestamp()
    for raw in events:
        if type(raw) is Block:
            # Only the compact form makes one: its points, checked as a metric event's are.
            problem = raw.problem or _block_problem(raw)
            if problem:
                rows.append(_malformed(run, raw.header, problem, now))
            else:
                batch.add_columns(raw.key, raw.points, raw.source)
            continue
        kind = raw.get("type") if isinstance(raw, dict) else None
        if kind == contract_events.METRIC:
            # Most of a batch's events, so the common case (a float value and time) is taken
            # here, without a call; _metric decides every other.
            key, step, value = raw.get("key"), raw.get("step"), raw.get("value")
            at = raw.get("time")
            if (
                type(key) is str
                and type(step) is int
                and type(value) is float
                and type(at) is float
                and 0 < len(key) <= MAX_KEY_CHARS
                and key.isprintable()
                and _STEP_MIN <= step <= _STEP_MAX
                and isfinite(value)
                and isfinite(at)
            ):
                point = (step, value, at)
            else:
                key, point = _metric(raw, stamp)
            if point is None:
                rows.append(_malformed(run, raw, "a metric needs key, integer step and value", now))
                continue
            source = raw.get(SOURCE_FIELD)
            if source is None or source == TRACK:
                batch.points.setdefault(key, []).append(point)
            elif source in SOURCES:
                batch.sourced.setdefault(source, {}).setdefault(key, []).append(point)
            else:
                problem = f"a metric's source must be one of {', '.join(SOURCES)}"
                rows.append(_malformed(run, raw, problem, now))
            continue
        if not isinstance(kind, str) or not 0 < len(kind) <= MAX_TYPE_CHARS:
            rows.append(_malformed(run, raw, "no valid type", now))
            continue
        if kind in _NOT_STORED:
            continue
        declaration = declared.get(kind)
        problem = declaration.problem(raw) if declaration else None
        owner = owners.get(kind) if declaration else None
        if owner is not None and owner != run.kind:
            problem = f"{kind} events belong to {owner} runs, not to a {run.kind} run"
        capability = needs.get(kind) if declaration else None
        if capability is not None and not (run_kind and run_kind.can(capability)):
            problem = (
                f"{kind} events belong to runs of kinds with the {capability} capability, "
                f"which {run.kind} runs do not have"
            )
        if problem:
            rows.append(_malformed(run, raw, problem, now))
            continue
        if kind == contract_events.STEP_STARTED:
            # Only the newest matters: one field of the attempt, not a row per step.
            # A user's script may write this line too: any text must store.
            limit = RunAttempt._meta.get_field("current_step").max_length
            name = storable(str(raw["name"]))[:limit]
            batch.current_step = (name, _time(raw.get("time"), now))
            continue
        if kind == contract_events.STEP:
            batch.current_step = ("", None)
        data = {key: value for key, value in raw.items() if key not in ("type", "time")}
        if kind == contract_events.LOG:
            data["line"] = _scrub(str(data.get("line", "")), secrets)
        elif kind == contract_events.RESULT:
            result = data
        elif kind == contract_events.DIAGNOSIS:
            data = _store_diagnosis(run, data, secrets)
        handler = _handlers.get(kind)
        try:
            if handler is not None and handler(batch, data):
                continue
        except MalformedEvent as exc:
            rows.append(_malformed(run, raw, str(exc), now))
            continue
        time = _time(raw.get("time"), now)
        # A NUL in a line (a binary printed) must not fail the batch: PostgreSQL refuses it.
        data = storable_json(data)
        rows.append(RunEvent(run=run, attempt=run.attempt, type=kind, time=time, data=data))
    _number_lines(run, rows)
    RunEvent.objects.bulk_create(rows, batch_size=1000)
    batch.finish()
    return result


def _number_lines(run: Run, rows: list[RunEvent]) -> None:
    """Number the batch's log lines on from the attempt's last, and note its first error.

    Batches of one run do not interleave: their callers hold the run's row lock (the
    exactly-once offset needs it too), so the numbers run on without gaps or repeats.
    """
    lines = [row for row in rows if row.type == contract_events.LOG]
    if not lines:
        return
    last = (
        RunEvent.objects.filter(run=run, attempt=run.attempt, line_no__isnull=False)
        .order_by("-line_no")
        .values_list("line_no", flat=True)
        .first()
    )
    for number, row in enumerate(lines, start=(last or 0) + 1):
        row.line_no = number
    error = next(
        (row.line_no for row in lines if _FIRST_ERROR.search(str(row.data.get("line", "")))), None
    )
    if error is not None:
        RunAttempt.objects.filter(
            run=run, number=run.attempt, first_error_line__isnull=True
        ).update(first_error_line=error)


def _store_diagnosis(run: Run, data: dict[str, Any], secrets: Any) -> dict[str, Any]:
    """The run's diagnosis and findings, as the run API shows them; the event keeps a copy."""
    diagnosis = data.get("diagnosis")
    findings = [f for f in data.get("findings") or [] if isinstance(f, dict)][:50]
    if isinstance(diagnosis, dict):
        # Evidence quotes the run's own output: scrubbed like its log lines.
        diagnosis = dict(diagnosis)
        diagnosis["line"] = _scrub(str(diagnosis.get("line", "")), secrets)
        diagnosis["evidence"] = [
            dict(item, text=_scrub(str(item.get("text", "")), secrets))
            for item in diagnosis.get("evidence") or []
            if isinstance(item, dict)
        ][:20]
        diagnosis["findings"] = findings
        category = str(diagnosis.get("category", ""))
        if category not in CATEGORIES:
            category = "unknown"
        diagnosis["category"] = category
    else:
        diagnosis, category = None, ""
    data = storable_json({"diagnosis": diagnosis, "findings": findings})
    Run.objects.filter(pk=run.pk).update(
        diagnosis=data["diagnosis"], diagnosis_category=category, findings=data["findings"]
    )
    run.diagnosis, run.diagnosis_category, run.findings = (
        data["diagnosis"],
        category,
        data["findings"],
    )
    return data


def _metric(raw: dict[str, Any], stamp: float) -> tuple[str, Point | None]:
    """The key and (step, value, time) of a metric event; no point when it is malformed.

    store_events takes the common case (float value and time) itself and
    leaves the others to this. type() rather than isinstance(): a JSON true
    is neither a step nor a value.
    """
    key, step, value = raw.get("key"), raw.get("step"), raw.get("value")
    # A key names a series on every database: no NUL, lone surrogate or control character.
    if type(key) is not str or not 0 < len(key) <= MAX_KEY_CHARS or not key.isprintable():
        return "", None
    if type(step) is not int or not _STEP_MIN <= step <= _STEP_MAX:
        return key, None
    if type(value) is float:
        if not isfinite(value):
            value = None
    elif type(value) is int:
        value = _finite(value)
    elif value is not None:
        return key, None
    time = raw.get("time")
    if type(time) is not float or not isfinite(time):
        time = _finite(time)
    return key, (step, value, stamp if time is None else time)


def _block_problem(block: Block) -> str | None:
    """What is wrong with a block's key or source (its points are checked as it is read)."""
    key, source = block.key, block.source
    if type(key) is not str or not 0 < len(key) <= MAX_KEY_CHARS or not key.isprintable():
        return f"a block's key is a printable string of 1 to {MAX_KEY_CHARS} characters"
    if source not in SOURCES:
        return f"a block's source must be one of {', '.join(SOURCES)}"
    return None


def _finite(number: Any) -> float | None:
    """A JSON number as a finite float: None for NaN, the infinities and what is no number."""
    if type(number) is float:
        return number if isfinite(number) else None
    if type(number) is int:
        try:
            return float(number)
        except OverflowError:
            return None
    return None


def _malformed(run: Run, raw: Any, why: str, now: datetime) -> RunEvent:
    text = json.dumps(raw, default=str)[:500]
    line = f"malformed event ({why}) stored as text: {text}"
    return RunEvent(
        run=run,
        attempt=run.attempt,
        type=contract_events.LOG,
        time=now,
        data={"stream": contract_events.RUNNER, "line": line},
    )


def _time(value: Any, now: datetime) -> datetime:
    if isinstance(value, int | float) and not isinstance(value, bool) and isfinite(value):
        try:
            return datetime.fromtimestamp(value, tz=UTC)
        except (OverflowError, OSError, ValueError):
            pass
    return now


# A secret this short is redacted only where it stands alone: anywhere, it would blank out
# pieces of ordinary words ("pw" in "pwd").
_SHORT_SECRET = 6


def _secret_values(run: Run) -> list[str | re.Pattern[str]]:
    """What a log line of the run must not show: the values of its secret env variables."""
    env = run.spec.get("env") or {}
    values = {value for key, value in env.items() if is_secret_name(key) and value}
    # Longest first: a secret that contains another is redacted whole.
    return [
        value
        if len(value) >= _SHORT_SECRET
        else re.compile(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])")
        for value in sorted(values, key=len, reverse=True)
    ]


def _scrub(line: str, secrets: list[str | re.Pattern[str]]) -> str:
    for secret in secrets:
        if isinstance(secret, str):
            line = line.replace(secret, REDACTED)
        else:
            line = secret.sub(REDACTED, line)
    return redact_text(_TOKEN.sub(REDACTED, line))
