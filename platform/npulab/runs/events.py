"""Turning events.jsonl batches into rows (the format is in DESIGN.md)."""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from typing import Any

from npulab.runs.checkpoints import mark_damaged, record_checkpoint
from npulab.runs.models import Metric, Run, RunAttempt, RunEvent
from workers.redact import REDACTED, is_secret_name

MAX_TYPE_CHARS = 32
MAX_KEY_CHARS = 200
_STEP_RANGE = (-(2**63), 2**63 - 1)
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
    points: list[Metric] = []
    result = None
    for raw in events:
        kind = raw.get("type") if isinstance(raw, dict) else None
        if not isinstance(kind, str) or not 0 < len(kind) <= MAX_TYPE_CHARS:
            rows.append(_malformed(run, raw, "no valid type", now))
            continue
        if kind in _NOT_STORED:
            continue
        time = _time(raw.get("time"), now)
        if kind == "metric":
            point = _metric(run, raw, time)
            if point is None:
                rows.append(_malformed(run, raw, "a metric needs key, integer step and value", now))
            else:
                points.append(point)
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
        elif kind == "resume" and isinstance(data.get("step"), int):
            # Points of this batch before the resume were logged by the lost run too.
            Metric.objects.bulk_create(points, batch_size=5000)
            points = []
            _resumed(run, data["step"])
        rows.append(RunEvent(run=run, attempt=run.attempt, type=kind, time=time, data=data))
    RunEvent.objects.bulk_create(rows, batch_size=1000)
    Metric.objects.bulk_create(points, batch_size=5000)
    return result


def _resumed(run: Run, step: int) -> None:
    Metric.objects.filter(run=run, step__gt=step).delete()
    RunAttempt.objects.filter(run=run, number=run.attempt).update(resumed_from_step=step)


def _metric(run: Run, raw: dict[str, Any], time: datetime) -> Metric | None:
    key, step, value = raw.get("key"), raw.get("step"), raw.get("value")
    if not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_CHARS:
        return None
    if isinstance(step, bool) or not isinstance(step, int):
        return None
    if not _STEP_RANGE[0] <= step <= _STEP_RANGE[1]:
        return None
    if value is not None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        value = float(value)
        if not math.isfinite(value):
            value = None
    return Metric(run=run, attempt=run.attempt, key=key, step=step, value=value, time=time)


def _malformed(run: Run, raw: Any, why: str, now: datetime) -> RunEvent:
    text = json.dumps(raw, default=str)[:500]
    line = f"malformed event ({why}) stored as text: {text}"
    return RunEvent(
        run=run, attempt=run.attempt, type="log", time=now, data={"stream": "runner", "line": line}
    )


def _time(value: Any, now: datetime) -> datetime:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
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
