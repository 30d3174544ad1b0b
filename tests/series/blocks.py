"""The points and rollup blocks of some series as stored, and the blocks recomputed from the
points."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest
from django.db.models import QuerySet

from npulab.series import chunks, rollups
from npulab.series.models import MetricChunk, MetricRollupSegment, MetricSeries

# A stored point: its series' key and id, step, value (None for none), time and attempt.
Stored = tuple[str, int, int, float | None, float, int]


def stored_points(series: QuerySet[MetricSeries]) -> list[Stored]:
    """Every point stored in the series' chunks, by series id and then step; a repeated step's
    in the order stored."""
    of_series: dict[tuple[int, str], list[tuple[int, chunks.Points, int]]] = defaultdict(list)
    rows = MetricChunk.objects.filter(series__in=series).values_list(
        "series_id", "series__key", "pk", "attempt", "points", "data"
    )
    for series_id, key, pk, attempt, count, data in rows:
        of_series[series_id, key].append((pk, chunks.unpack(data, count), attempt))
    found = []
    for (series_id, key), stored in sorted(of_series.items()):
        points = [
            (step, pk, value, time, attempt)
            for pk, columns, attempt in stored
            for step, value, time in zip(*(column.tolist() for column in columns), strict=True)
        ]
        for step, _, value, time, attempt in sorted(points, key=lambda point: point[:2]):
            found.append(
                (key, series_id, step, None if math.isnan(value) else value, time, attempt)
            )
    return found


def expected_blocks(series: QuerySet[MetricSeries]) -> dict[tuple[str, int, int], tuple]:
    """The rollups recomputed from the stored points, in Python."""
    groups: dict[tuple[str, int, int], list[tuple[int, float | None]]] = defaultdict(list)
    for key, _, step, value, _, _ in stored_points(series):
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
    """The stored blocks by (key, size, start), each as ``expected_blocks`` gives it: read from
    their rows' arrays (first steps, counts and finite counts, then sums, minimums and
    maximums, NaN for none), each row holding blocks of its segment only, in step order."""
    rows = MetricRollupSegment.objects.filter(series__in=series).values_list(
        "series__key", "size", "segment", "blocks", "data"
    )
    found = {}
    for key, size, segment, count, data in rows:
        ints = np.frombuffer(data, "<i8", 3 * count).reshape(3, count).tolist()
        floats = np.frombuffer(data, "<f8", 3 * count, 24 * count).reshape(3, count).tolist()
        starts = [step - step % size for step in ints[0]]
        assert starts == sorted(set(starts))
        assert {start // (size * rollups.SEGMENT) for start in starts} == {segment}
        for start, first_step, points, counted, *aggregates in zip(
            starts, *ints, *floats, strict=True
        ):
            total, minimum, maximum = (None if math.isnan(x) else x for x in aggregates)
            found[key, size, start] = (points, counted, total, minimum, maximum, first_step)
    return found
