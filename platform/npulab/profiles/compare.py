"""Two profiles' summaries side by side: step time, per-op and per-kernel-type time.

The summaries are ``npulab.profiles.summary.summarise()``'s: ``steps`` (``median_us``
and the ``items``, each with ``dur_us``), ``top_ops`` (``by_total``: rows by op name and
input shapes, summed here by name), ``top_kernels`` (by name) and ``kernel_types`` (HTA's
kernel types: computation, communication, memory ...). Same model on two CANN versions, or a
GPU host against an NPU host: the same op names line up (``aten::addmm``) while the
kernels differ by device, which is why kernel *types* are compared, not kernel names.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

# Row names a summary may use for what it totals, and for the time it totals.
NAME_KEYS = ("name", "type", "kernel_type", "op")
TIME_KEYS = ("total_us", "us", "dur_us", "time_us")
COUNT_KEYS = ("count", "calls", "occurrences")


@dataclass
class Delta:
    """One name's time in both profiles: ``change`` is (b - a) / a, None where a is 0."""

    name: str
    a_us: float | None
    b_us: float | None
    a_count: int | None = None
    b_count: int | None = None

    @property
    def delta_us(self) -> float | None:
        if self.a_us is None or self.b_us is None:
            return None
        return self.b_us - self.a_us

    @property
    def change(self) -> float | None:
        if not self.a_us or self.b_us is None:
            return None
        return (self.b_us - self.a_us) / self.a_us

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "a_us": self.a_us,
            "b_us": self.b_us,
            "a_count": self.a_count,
            "b_count": self.b_count,
            "delta_us": self.delta_us,
            "change": self.change,
        }


@dataclass
class Comparison:
    """Profile b against profile a."""

    step: Delta
    steps: tuple[int, int]
    ops: list[Delta] = field(default_factory=list)
    kernels: list[Delta] = field(default_factory=list)
    kernel_types: list[Delta] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "step": self.step.as_dict(),
            "steps": list(self.steps),
            "ops": [row.as_dict() for row in self.ops],
            "kernels": [row.as_dict() for row in self.kernels],
            "kernel_types": [row.as_dict() for row in self.kernel_types],
        }


def step_times_us(summary: dict[str, Any]) -> list[float]:
    """The durations of the profile's steps (µs), in order."""
    steps = summary.get("steps") or []
    if isinstance(steps, dict):
        steps = steps.get("items") or []
    times = []
    for step in steps:
        value = _number(step, ("dur_us", *TIME_KEYS)) if isinstance(step, dict) else None
        if value is not None and value > 0:
            times.append(value)
    return times


def step_time_us(summary: dict[str, Any]) -> float | None:
    """The profile's step time: the median of its steps, so one slow first step (warm-up,
    compilation) does not move it; None without steps."""
    steps = summary.get("steps")
    if isinstance(steps, dict) and isinstance(steps.get("median_us"), int | float):
        return float(steps["median_us"])
    times = step_times_us(summary)
    return statistics.median(times) if times else None


def totals(rows: Any) -> dict[str, tuple[float, int | None]]:
    """A summary table (a list of rows, or a mapping of name to row or number) by name."""
    found: dict[str, tuple[float, int | None]] = {}
    if isinstance(rows, dict):
        items = [
            {"name": name, "total_us": value}
            if isinstance(value, int | float)
            else {"name": name, **value}
            for name, value in rows.items()
            if isinstance(value, int | float | dict)
        ]
    elif isinstance(rows, list):
        items = [row for row in rows if isinstance(row, dict)]
    else:
        items = []
    for row in items:
        name = next((str(row[key]) for key in NAME_KEYS if row.get(key) not in (None, "")), None)
        value = _number(row, TIME_KEYS)
        if name is None or value is None:
            continue
        count = _number(row, COUNT_KEYS)
        before, before_count = found.get(name, (0.0, None))
        counted = None if count is None else int(count) + (before_count or 0)
        found[name] = (before + value, counted)
    return found


def deltas(a_rows: Any, b_rows: Any) -> list[Delta]:
    """Every name in either table, the largest change in time first (gained or lost)."""
    a, b = totals(a_rows), totals(b_rows)
    rows = [
        Delta(
            name,
            a[name][0] if name in a else None,
            b[name][0] if name in b else None,
            a[name][1] if name in a else None,
            b[name][1] if name in b else None,
        )
        for name in a.keys() | b.keys()
    ]
    rows.sort(key=lambda row: (-abs((row.b_us or 0.0) - (row.a_us or 0.0)), row.name))
    return rows


def compare(a: dict[str, Any], b: dict[str, Any]) -> Comparison:
    """Summary b against summary a."""
    return Comparison(
        step=Delta("step time", step_time_us(a), step_time_us(b)),
        steps=(len(step_times_us(a)), len(step_times_us(b))),
        ops=deltas(_ops(a), _ops(b)),
        kernels=deltas(a.get("top_kernels"), b.get("top_kernels")),
        kernel_types=deltas(a.get("kernel_types"), b.get("kernel_types")),
    )


def _ops(summary: dict[str, Any]) -> Any:
    ops = summary.get("top_ops")
    return ops.get("by_total") if isinstance(ops, dict) and "by_total" in ops else ops


def _number(row: dict[str, Any], keys: tuple[str, ...]) -> float | None:
    for key in keys:
        value = row.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None
