"""What a row of a run table shows beside the run's facts, from its kind (npulab.runs.kinds)."""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from npulab.runs import logview, rows
from npulab.runs.models import Run
from npulab.runs.rows import RowResult

register = template.Library()

SPARK_WIDTH, SPARK_HEIGHT = 80, 18


@register.filter
def entry_line(run: Run) -> str:
    """The entry and its arguments as a command line, for a kind whose spec has an entry."""
    spec = run.spec or {}
    entry = spec.get("entry")
    if not entry:
        return ""
    return shlex.join([entry, *spec.get("args", [])])


@register.simple_tag
def row_results(runs: Iterable[Run]) -> dict[int, RowResult]:
    """``{% row_results runs as results %}``: the Result cells of a table of runs, read
    together (``results|row_of:run`` then gives a run's)."""
    return rows.row_results(runs)


@register.filter
def row_of(results: dict[int, RowResult], run: Run) -> RowResult | None:
    return results.get(run.pk)


@register.filter
def sparkline(values: list[float | None]) -> str:
    """An inline SVG line of ``values``, scaled to its box; missing values leave gaps."""
    known = [value for value in values if value is not None]
    if len(known) < 2:
        return ""
    low, high = min(known), max(known)
    span = (high - low) or 1.0
    step = SPARK_WIDTH / max(1, len(values) - 1)
    runs: list[list[str]] = [[]]
    for index, value in enumerate(values):
        if value is None:
            runs.append([])
            continue
        y = SPARK_HEIGHT - 1 - (value - low) / span * (SPARK_HEIGHT - 2)
        runs[-1].append(f"{index * step:.1f},{y:.1f}")
    lines = "".join(
        format_html('<polyline points="{}"/>', " ".join(points)) for points in runs if points
    )
    return format_html(
        '<svg class="sparkline" width="{}" height="{}" viewBox="0 0 {} {}" role="img" '
        'aria-label="trend">{}</svg>',
        SPARK_WIDTH,
        SPARK_HEIGHT,
        SPARK_WIDTH,
        SPARK_HEIGHT,
        mark_safe(lines),  # noqa: S308 - built from format_html pieces above
    )


@register.filter
def log_line(line: str, query: str = "") -> str:
    """A log line with its ANSI colours and ``query``'s matches marked (npulab.runs.logview)."""
    return logview.render_line(str(line), query)
