"""What the stability pages show: the interval grid of one run, the rows comparing several."""

from __future__ import annotations

import statistics
from typing import Any

from npulab.runs.models import Run
from npulab.stability.models import StabilityInterval
from npulab.stability.verdicts import run_verdict

# The grid shows the newest intervals of a long run; the counts cover all of them.
GRID_INTERVALS = 240


def interval_grid(run: Run) -> dict[str, Any]:
    """Per device, its newest intervals' consistency outcomes and throughput; the counts."""
    rows = StabilityInterval.objects.filter(run=run, attempt=run.attempt)
    counts: dict[str, int] = {}
    for outcome in rows.values_list("consistency", flat=True):
        counts[outcome] = counts.get(outcome, 0) + 1
    last = rows.order_by("-interval").values_list("interval", flat=True).first() or 0
    shown = rows.filter(interval__gt=last - GRID_INTERVALS).order_by("device", "interval")
    devices: dict[int, list[StabilityInterval]] = {}
    for row in shown:
        devices.setdefault(row.device, []).append(row)
    return {
        "devices": sorted(devices.items()),
        "counts": sorted(counts.items()),
        "intervals": last,
        "cut": last > GRID_INTERVALS,
    }


def compare_rows(runs: list[Run]) -> dict[str, Any]:
    """Each run's verdict and numbers, its throughput against the first run's."""
    rows = []
    first_throughput = None
    for position, run in enumerate(runs):
        summary = (run.result or {}).get("summary") or {}
        throughput = _median_throughput(run)
        if position == 0:
            first_throughput = throughput
        change = None
        if position and throughput is not None and first_throughput:
            change = (throughput - first_throughput) / first_throughput
        rows.append(
            {
                "run": run,
                "verdict": run_verdict(run),
                "throughput": throughput,
                "unit": summary.get("unit", ""),
                "change": change,
                "worst_drop_pct": summary.get("worst_drop_pct"),
                "peak_temperature_c": summary.get("peak_temperature_c"),
                "mismatches": summary.get("mismatches"),
                "intervals": summary.get("intervals"),
            }
        )
    hosts = {run.host_id for run in runs}
    return {"rows": rows, "same_host": len(hosts) == 1 and None not in hosts}


def _median_throughput(run: Run) -> float | None:
    """The median over its intervals of the devices' summed throughput."""
    totals: dict[int, float] = {}
    found = StabilityInterval.objects.filter(run=run, attempt=run.attempt, throughput__isnull=False)
    for interval, value in found.values_list("interval", "throughput"):
        totals[interval] = totals.get(interval, 0.0) + value
    if totals:
        return statistics.median(totals.values())
    value = ((run.result or {}).get("summary") or {}).get("throughput")
    return float(value) if isinstance(value, int | float) else None
