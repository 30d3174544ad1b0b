"""Turning events.jsonl batches into rows (the format is in DESIGN.md)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from math import isfinite
from typing import Any

from npulab.runs.checkpoints import mark_damaged, record_checkpoint
from npulab.runs.ingest import Point, drop_points_after, insert_metrics
from npulab.runs.models import Run, RunAttempt, RunEvent
from workers.redact import REDACTED, is_secret_name

MAX_TYPE_CHARS = 32
MAX_KEY_CHARS = 200
_STEP_MIN, _STEP_MAX = -(2**63), 2**63 - 1
# Tokens of this platform, should a user's program print one.
_TOKEN = re.compile(r"\bnp[lh]_[A-Za-z0-9_-]{20,}")
# Events that only prove liveness; storing them would only cost.
_NOT_STORED = {"heartbeat"}


def store_events(run: Run, events: list[Any], now: datetime) -> dict[str, Any] | None:
    """Bulk-insert one batch; returns the batch's result event (without type/time), if any.

    Nothing is dropped silently: an event that does not fit the contract is
    stored as a ``runner`` log line saying what was wrong with it. Three
    types also act: ``checkpoint`` and ``checkpoint_damaged`` keep the run's
    checkpoint list, and ``resume`` (an attempt went on from a checkpoint)
    drops the metric points after that step, which the new attempt logs anew.
    """
    secrets = _secret_values(run)
    rows: list[RunEvent] = []
    points: dict[str, list[Point]] = {}
    result = None
    stamp = now.timestamp()
    for raw in events:
        kind = raw.get("type") if isinstance(raw, dict) else None
        if kind == "metric":
            key, point = _metric(raw, stamp)
            if point is None:
                rows.append(_malformed(run, raw, "a metric needs key, integer step and value", now))
            else:
                points.setdefault(key, []).append(point)
            continue
        if not isinstance(kind, str) or not 0 < len(kind) <= MAX_TYPE_CHARS:
            rows.append(_malformed(run, raw, "no valid type", now))
            continue
        if kind in _NOT_STORED:
            continue
        data = {key: value for key, value in raw.items() if key not in ("type", "time")}
        if kind == "log":
            data["line"] = _scrub(str(data.get("line", "")), secrets)
        elif kind == "result":
            result = data
        elif kind == "checkpoint":
            record_checkpoint(run, data)
        elif kind == "checkpoint_damaged":
            mark_damaged(run, data.get("step"), str(data.get("reason", "")))
        elif kind == "resume" and (data.get("step") is None or type(data["step"]) is int):
            # Points of this batch before the resume were logged by the lost run too.
            insert_metrics(run, points)
            points = {}
            _resumed(run, data.get("step"))
        time = _time(raw.get("time"), now)
        rows.append(RunEvent(run=run, attempt=run.attempt, type=kind, time=time, data=data))
    RunEvent.objects.bulk_create(rows, batch_size=1000)
    insert_metrics(run, points)
    return result


def _resumed(run: Run, step: int | None) -> None:
    """Drop what the new attempt logs anew: points after ``step``, or all (no checkpoint)."""
    drop_points_after(run, step)
    RunAttempt.objects.filter(run=run, number=run.attempt).update(resumed_from_step=step)


def _metric(raw: dict[str, Any], stamp: float) -> tuple[str, Point | None]:
    """The key and (step, value, time) of a metric event; no point when it is malformed.

    Called for every point of every batch, so the common case (float value
    and time) is tested first. type() rather than isinstance(): a JSON true
    is neither a step nor a value.
    """
    key, step, value = raw.get("key"), raw.get("step"), raw.get("value")
    if type(key) is not str or not 0 < len(key) <= MAX_KEY_CHARS:
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
        run=run, attempt=run.attempt, type="log", time=now, data={"stream": "runner", "line": line}
    )


def _time(value: Any, now: datetime) -> datetime:
    if isinstance(value, int | float) and not isinstance(value, bool) and isfinite(value):
        try:
            return datetime.fromtimestamp(value, tz=UTC)
        except (OverflowError, OSError, ValueError):
            pass
    return now


def _secret_values(run: Run) -> list[str]:
    env = run.spec.get("env") or {}
    # Short values would blank out ordinary words.
    return [value for key, value in env.items() if is_secret_name(key) and len(value) >= 6]


def _scrub(line: str, secrets: list[str]) -> str:
    for secret in secrets:
        line = line.replace(secret, REDACTED)
    return _TOKEN.sub(REDACTED, line)
