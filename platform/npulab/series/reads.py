"""Reading metric series back: whole, or downsampled in the database for a chart.

A chart has a few thousand pixels; a long training run logs millions of
points. Downsampling groups the steps into equal buckets and returns each
bucket's first step with the mean, minimum and maximum, so a spike survives
as the band's edge. A bucket as wide as a rollup block or wider is computed
from the blocks (npulab.series.rollups), so its cost follows the number of
buckets, not of points; narrower ones scan the points through their index.
"""

from __future__ import annotations

import math
from typing import Any

from django.db import connection
from django.db.models import QuerySet

from npulab.series import rollups
from npulab.series.models import Metric, MetricSeries
from npulab.series.owners import Owner

DEFAULT_POINTS = 1000
MAX_POINTS = 20000

_FIRST_STEP = "SELECT MIN(step) FROM {table} WHERE series_id = %s"
# Ties (a step logged twice) come back in index order: the order they were stored.
_WHOLE = "SELECT step, value FROM {table} WHERE series_id = %s ORDER BY step"
# Integer division puts each step in its bucket on PostgreSQL and SQLite alike.
_BUCKETS = """
    SELECT MIN(step), SUM(value), COUNT(value), MIN(value), MAX(value)
    FROM {table}
    WHERE series_id = %s
    GROUP BY (step - %s) / %s
    ORDER BY 1
"""


def _sql(template: str) -> str:
    return template.format(table=connection.ops.quote_name(Metric._meta.db_table))


def series(owner: Owner, key: str, points: int | None = None) -> dict[str, Any]:
    """One metric: every [step, value] point, or at most ``points`` [step, mean, min, max]."""
    found = MetricSeries.objects.filter(**owner.fields(), key=key).first()
    if found is None:
        return {"key": key, "total": 0, "downsampled": False, "points": []}
    if points is None or found.points <= points:
        with connection.cursor() as cursor:
            cursor.execute(_sql(_WHOLE), [found.pk])
            rows = cursor.fetchall()
        return {"key": key, "total": found.points, "downsampled": False, "points": rows}
    return {
        "key": key,
        "total": found.points,
        "downsampled": True,
        "points": _buckets(found, points),
    }


def plan(low: int, high: int, points: int) -> tuple[int | None, int, int]:
    """How to read steps ``low``..``high`` as at most ``points`` buckets: (block size, base,
    bucket width), with size None where the buckets are narrower than the finest block and
    are computed from the points."""
    width = math.ceil((high - low + 1) / points)
    for size in rollups.SIZES:
        if width >= size:
            # Whole blocks per bucket: at least half the buckets asked for.
            base = low - low % size
            return size, base, math.ceil((high - base + 1) / points / size) * size
    return None, low, width


def _buckets(found: MetricSeries, points: int) -> list[list[Any]]:
    with connection.cursor() as cursor:
        cursor.execute(_sql(_FIRST_STEP), [found.pk])
        (low,) = cursor.fetchone()
        size, base, width = plan(low, found.last_step, points)
        if size is not None:
            return rollups.buckets(found.pk, size, base, width)
        cursor.execute(_sql(_BUCKETS), [found.pk, low, width])
        return [
            [first, total / counted if counted else None, minimum, maximum]
            for first, total, counted, minimum, maximum in cursor.fetchall()
        ]


def summary(owner: Owner) -> list[dict[str, Any]]:
    """Each metric's name, point count and last step, by name."""
    return list(_of(owner).order_by("key").values("key", "points", "last_step"))


def keys(owner: Owner) -> list[str]:
    """The owner's metric names, sorted."""
    return list(_of(owner).order_by("key").values_list("key", flat=True))


def _of(owner: Owner) -> QuerySet[MetricSeries]:
    return MetricSeries.objects.filter(**owner.fields())
