"""The rollup blocks of some series, as stored and as recomputed from their points."""

from __future__ import annotations

import math
from collections import defaultdict

import pytest
from django.db.models import QuerySet

from npulab.series import rollups
from npulab.series.models import Metric, MetricRollup, MetricSeries


def expected_blocks(series: QuerySet[MetricSeries]) -> dict[tuple[str, int, int], tuple]:
    """The rollups recomputed from the stored points, in Python."""
    groups: dict[tuple[str, int, int], list[tuple[int, float | None]]] = defaultdict(list)
    for key, step, value in Metric.objects.filter(series__in=series).values_list(
        "series__key", "step", "value"
    ):
        for size in rollups.SIZES:
            groups[key, size, step - step % size].append((step, value))
    blocks = {}
    for where, points in groups.items():
        values = [value for _, value in points if value is not None]
        blocks[where] = (
            len(points),
            len(values),
            pytest.approx(math.fsum(values)) if values else None,
            min(values, default=None),
            max(values, default=None),
            min(step for step, _ in points),
        )
    return blocks


def stored_blocks(series: QuerySet[MetricSeries]) -> dict[tuple[str, int, int], tuple]:
    rows = MetricRollup.objects.filter(series__in=series).values_list(
        "series__key", "size", "start", "points", "counted", "total", "minimum", "maximum",
        "first_step",
    )  # fmt: skip
    return {(key, size, start): tuple(rest) for key, size, start, *rest in rows}
