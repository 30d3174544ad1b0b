"""The stability kind's ``interval`` events: a row each, in bulk, and points of its series.

Throughput and each telemetry reading become run metric series (step: the
interval), so the run page and the compare page chart them like any metric.
"""

from __future__ import annotations

import math
from typing import Any

from npulab.core.text import storable
from npulab.runs.events import Batch, MalformedEvent
from npulab.runs.models import Run
from npulab.stability.models import MAX_ERROR_CHARS, StabilityInterval
from workers.contract.devices import MAX_DEVICES
from workers.contract.telemetry import READINGS
from workers.kinds.stability import CONSISTENCY, MAX_INTERVALS

THROUGHPUT = "throughput"
_PENDING = "stability.intervals"


def series_key(name: str, device: int) -> str:
    """A device's series: ``throughput/0``, ``temperature_c/1``."""
    return f"{name}/{device}"


def on_interval(batch: Batch, data: dict[str, Any]) -> bool:
    consistency = data["consistency"]
    if consistency not in CONSISTENCY:
        raise MalformedEvent("interval.consistency must be one of " + ", ".join(CONSISTENCY))
    interval, device = data["interval"], data["device"]
    if not 0 <= interval <= MAX_INTERVALS:
        raise MalformedEvent(f"interval.interval must be 0 to {MAX_INTERVALS}")
    if not 0 <= device < MAX_DEVICES:
        raise MalformedEvent(f"interval.device must be 0 to {MAX_DEVICES - 1}")
    throughput = data.get("throughput")
    telemetry = data.get("telemetry") or {}
    # Only the contract's readings, and only numbers: the rest of a hostile line is dropped.
    readings = {
        name: float(value)
        for name, value in telemetry.items()
        if name in READINGS
        and isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
    }
    batch.pending(_PENDING, _insert).append(
        StabilityInterval(
            run=batch.run,
            attempt=batch.run.attempt,
            interval=interval,
            device=device,
            seconds=float(data.get("seconds", 0.0)),
            iterations=max(0, min(int(data.get("iterations", 0)), 2**62)),
            throughput=throughput,
            unit=storable(str(data.get("unit", "")))[:20],
            consistency=consistency,
            max_rel_err=data.get("max_rel_err"),
            health=storable(str(data.get("health", "")))[:20],
            telemetry=readings,
            error=storable(data.get("error") or "", MAX_ERROR_CHARS),
        )
    )
    when = batch.now.timestamp()
    if throughput is not None:
        batch.points.setdefault(series_key(THROUGHPUT, device), []).append(
            (interval, float(throughput), when)
        )
    for name, value in readings.items():
        batch.points.setdefault(series_key(name, device), []).append((interval, value, when))
    return True


def _insert(run: Run, rows: list[StabilityInterval]) -> None:
    # A batch delivered twice (a forwarder resync) must not fail on rows already in.
    StabilityInterval.objects.bulk_create(rows, batch_size=1000, ignore_conflicts=True)
