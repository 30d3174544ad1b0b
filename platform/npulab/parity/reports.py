"""What the run page and the API show of a parity run: the layers, first divergent on top,
and both sides' loss curves as one chart."""

from __future__ import annotations

from typing import Any

import numpy as np
from django.db.models import QuerySet

from npulab.parity.models import ParityLayer
from npulab.runs.models import Placement, Run
from npulab.series.owners import Owner
from npulab.series.reads import WHOLE, read
from npulab.snapshots.models import Snapshot
from npulab.snapshots.stack import STACK_FIELDS, stack
from workers.kinds.parity import SIDES, side_role

# The page's table shows this many rows; the API pages through all of them.
PAGE_ROWS = 200
CHART_WIDTH, CHART_HEIGHT = 600, 180
CHART_POINTS = 600
LOSS_KEY = "parity_loss/{side}"


def sides(run: Run) -> dict[str, dict[str, Any]]:
    """Where each side ran: its host, and the snapshot and stack of that host's environment.

    Sides on one host are both the run's; sides on hosts of their own are each their
    placement's ("side a", "side b"). The stack is the point: a side's stack is its host's.
    """
    apart = {
        placement.role: placement
        for placement in Placement.objects.filter(run=run, attempt=run.attempt)
        .exclude(role="")
        .select_related("snapshot")
    }
    found = {}
    for side in SIDES:
        placement = apart.get(side_role(side))
        if placement is not None:
            host, snapshot = placement.host_name, placement.snapshot
        else:
            host, snapshot = (run.host.name if run.host else None), run.snapshot
        found[side] = {
            "host": host,
            "snapshot": snapshot.pk if snapshot else None,
            "stack": stack(snapshot.data) if snapshot else None,
            "stack_text": stack_text(snapshot),
        }
    return found


def stack_text(snapshot: Snapshot | None) -> str:
    """ "CANN 8.0.RC1, torch 2.1.0": the stack parts a snapshot has, as people write them."""
    if snapshot is None:
        return ""
    found = stack(snapshot.data)
    return ", ".join(f"{label} {found[key]}" for key, label in STACK_FIELDS if found.get(key))


def layers(run: Run) -> QuerySet[ParityLayer]:
    """The run's layers of its newest attempt, in execution order."""
    return ParityLayer.objects.filter(run=run, attempt=run.attempt).order_by("index")


def first_divergent(run: Run) -> ParityLayer | None:
    """The first layer in execution order that breaks a threshold."""
    return layers(run).exclude(broken=[]).first()


def table(run: Run) -> dict[str, Any]:
    """The page's rows: the first divergent layer on top, then every layer in order."""
    first = first_divergent(run)
    rows = list(layers(run)[:PAGE_ROWS])
    return {
        "first": first,
        "rows": rows,
        "total": layers(run).count(),
        "broken": layers(run).exclude(broken=[]).count(),
    }


def loss_chart(run: Run) -> dict[str, Any] | None:
    """Both sides' losses as SVG polylines on shared axes; None without losses."""
    curves = {}
    for side in SIDES:
        # Downsampled, a bucket's mean is drawn.
        loss = read(Owner.of_run(run.pk), LOSS_KEY.format(side=side), CHART_POINTS)
        finite = np.isfinite(loss.values)
        steps, values = loss.columns[WHOLE[0]][finite], loss.values[finite]
        curves[side] = list(zip(steps.tolist(), values.tolist(), strict=True))
    every = [point for points in curves.values() for point in points]
    if not every:
        return None
    steps = [step for step, _ in every]
    values = [value for _, value in every]
    low_step, high_step = min(steps), max(steps)
    low, high = min(values), max(values)

    def x(step: float) -> float:
        return 0.0 if high_step == low_step else (step - low_step) / (high_step - low_step)

    def y(value: float) -> float:
        return 0.5 if high == low else (value - low) / (high - low)

    lines = {
        side: " ".join(
            f"{x(step) * CHART_WIDTH:.1f},{(1 - y(value)) * CHART_HEIGHT:.1f}"
            for step, value in points
        )
        for side, points in curves.items()
    }
    return {
        "lines": lines,
        "width": CHART_WIDTH,
        "height": CHART_HEIGHT,
        "low": low,
        "high": high,
        "first_step": low_step,
        "last_step": high_step,
        "points": {side: len(points) for side, points in curves.items()},
    }


BAR_HEIGHT = 18


def int8_bars(run: Run) -> dict[str, Any] | None:
    """The INT8 check's per-layer metric change as horizontal bars (longer: more harmful);
    None without the check."""
    report = (run.result.get("summary") or {}).get("int8")
    if not isinstance(report, dict) or not isinstance(report.get("layers"), list):
        return None
    layers = [layer for layer in report["layers"] if isinstance(layer, dict)]
    deltas = [abs(layer.get("delta") or 0.0) for layer in layers]
    widest = max(deltas, default=0.0) or 1.0
    keep = set(report.get("keep") or [])
    bars = [
        {
            "name": layer.get("name", ""),
            "delta": layer.get("delta"),
            "cosine": layer.get("cosine"),
            "max_abs_err": layer.get("max_abs_err"),
            "width": round(300 * abs(layer.get("delta") or 0.0) / widest, 1),
            "y": index * BAR_HEIGHT,
            "text_y": index * BAR_HEIGHT + 13,
            "kept": layer.get("name") in keep,
        }
        for index, layer in enumerate(layers)
    ]
    return {"report": report, "bars": bars, "height": len(bars) * BAR_HEIGHT}
