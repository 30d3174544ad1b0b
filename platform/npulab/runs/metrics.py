"""Reading metric series back: whole, or downsampled in the database for a chart.

A chart has a few thousand pixels; a long training run logs millions of
points. Downsampling groups the steps into equal buckets and returns each
bucket's first step with the mean, minimum and maximum, computed by the
database (one indexed scan), so a spike survives as the band's edge.
"""

from __future__ import annotations

import math
from typing import Any

from django.db import connection

from npulab.runs.models import Metric, Run

DEFAULT_POINTS = 1000
MAX_POINTS = 20000

_RANGE = "SELECT MIN(step), MAX(step), COUNT(*) FROM {table} WHERE run_id = %s AND key = %s"
_WHOLE = "SELECT step, value FROM {table} WHERE run_id = %s AND key = %s ORDER BY step, id"
# Integer division puts each step in its bucket on PostgreSQL and SQLite alike.
_BUCKETS = """
    SELECT MIN(step), AVG(value), MIN(value), MAX(value)
    FROM {table}
    WHERE run_id = %s AND key = %s
    GROUP BY (step - %s) / %s
    ORDER BY MIN(step)
"""


def _sql(template: str) -> str:
    return template.format(table=connection.ops.quote_name(Metric._meta.db_table))


def series(run: Run, key: str, points: int | None = None) -> dict[str, Any]:
    """One metric: every [step, value] point, or at most ``points`` [step, mean, min, max]."""
    with connection.cursor() as cursor:
        cursor.execute(_sql(_RANGE), [run.pk, key])
        low, high, total = cursor.fetchone()
        if points is None or total <= points:
            cursor.execute(_sql(_WHOLE), [run.pk, key])
            return {"key": key, "total": total, "downsampled": False, "points": cursor.fetchall()}
        width = max(1, math.ceil((high - low + 1) / points))
        cursor.execute(_sql(_BUCKETS), [run.pk, key, low, width])
        rows = [list(row) for row in cursor.fetchall()]
    return {"key": key, "total": total, "downsampled": True, "points": rows}


def keys(run: Run) -> list[str]:
    return list(
        Metric.objects.filter(run=run).order_by("key").values_list("key", flat=True).distinct()
    )
