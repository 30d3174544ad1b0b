"""Block aggregates of metric series, so a chart of a million points reads a thousand rows.

Every series has, for each size in SIZES, one MetricRollup per block of
``size`` steps that holds points: count, finite count, sum, min, max and
first step. Ingestion adds each batch's blocks (``aggregate`` then
``store``); a resume cuts them back with the points (``truncate``). A chart
bucket that spans whole blocks is the combination of those blocks, which is
exactly what the points would give (the mean as sum over count): reads
combine them (npulab.series.reads).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from django.db import connection

from npulab.series import chunks
from npulab.series.chunks import Points
from npulab.series.models import MetricRollup

# Largest first: a chart takes the coarsest blocks its bucket width allows.
# Each size is ten times the next, so a bucket never reads more than ten
# blocks (or, under the finest, ten points) of what it covers, at any
# resolution (issue 15: a bucket narrower than a 1,000-step block used to
# fall back to 100 blocks of 10).
SIZES = (10_000, 1_000, 100, 10)
# The lowest step a point may have: the start of its coarsest block (a multiple of the size,
# rounding down) must still be a 64-bit integer.
LOWEST_STEP = -(2**63) + SIZES[0]

# [points, counted, total, minimum, maximum, first_step]; total/min/max are
# None while no finite value has been seen, like SQL's SUM/MIN/MAX.
Block = list[Any]
# (series id, size, start) -> block
Blocks = dict[tuple[int, int, int], Block]

_COLUMNS = "series_id, size, start, points, counted, total, minimum, maximum, first_step"


# Merging a batch's block into a stored one. PostgreSQL's LEAST/GREATEST
# skip NULLs, SQLite's two-argument MIN/MAX return NULL: hence the COALESCEs.
_UPSERT = """
    INSERT INTO {rollup} ({columns}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
    ON CONFLICT (series_id, size, start) DO UPDATE SET
        points = {rollup}.points + excluded.points,
        counted = {rollup}.counted + excluded.counted,
        total = COALESCE({rollup}.total + excluded.total, {rollup}.total, excluded.total),
        minimum = COALESCE({least}({rollup}.minimum, excluded.minimum),
                           {rollup}.minimum, excluded.minimum),
        maximum = COALESCE({greatest}({rollup}.maximum, excluded.maximum),
                           {rollup}.maximum, excluded.maximum),
        first_step = {least}({rollup}.first_step, excluded.first_step)
"""
_COPY = "COPY {rollup} ({columns}) FROM STDIN (FORMAT BINARY)"
# {ids} is one placeholder per series: an owner has tens or hundreds, and IN (...) is the one
# spelling of a list that PostgreSQL and SQLite share.
_DELETE_FROM = """
    DELETE FROM {rollup} WHERE series_id IN ({ids}) AND size = %s AND start >= %s
"""


def _sql(template: str, ids: int = 0) -> str:
    quote = connection.ops.quote_name
    postgres = connection.vendor == "postgresql"
    return template.format(
        rollup=quote(MetricRollup._meta.db_table),
        columns=_COLUMNS,
        least="LEAST" if postgres else "MIN",
        greatest="GREATEST" if postgres else "MAX",
        ids=", ".join(["%s"] * ids),
    )


def aggregate(series_id: int, points: Points) -> Blocks:
    """The blocks of one batch of points in step order, at every size."""
    blocks: Blocks = {}
    if not len(points):
        return blocks
    finite = ~np.isnan(points.values)
    totals = np.where(finite, points.values, 0.0)
    for size in SIZES:
        starts = points.steps - points.steps % size
        edges = np.flatnonzero(np.concatenate(([True], starts[1:] != starts[:-1])))
        counted = np.add.reduceat(finite, edges, dtype=np.int64)
        columns = (
            starts[edges],
            np.diff(np.append(edges, len(points))),
            counted,
            # None while no finite value has been seen, like SQL's SUM/MIN/MAX.
            np.where(counted > 0, np.add.reduceat(totals, edges), np.nan),
            np.fmin.reduceat(points.values, edges),
            np.fmax.reduceat(points.values, edges),
            points.steps[edges],
        )
        lists = [column.tolist() for column in columns]
        for index in np.flatnonzero(counted == 0).tolist():
            for column in lists[3:6]:
                column[index] = None
        for start, *block in zip(*lists, strict=True):
            blocks[(series_id, size, start)] = block
    return blocks


def store(blocks: Blocks, last_steps: dict[int, int | None]) -> None:
    """Add a batch's blocks to the stored ones.

    ``last_steps`` is each series' last stored step before this batch: a
    block that starts after it cannot exist yet and is inserted in bulk
    (COPY on PostgreSQL); one that may exist is merged into the stored one.
    """
    fresh: list[tuple[Any, ...]] = []
    merged: list[tuple[Any, ...]] = []
    for (series_id, size, start), block in blocks.items():
        last = last_steps.get(series_id)
        row = (series_id, size, start, *block)
        (fresh if last is None or start > last else merged).append(row)
    if connection.vendor == "postgresql":
        _copy(fresh)
    else:
        merged += fresh
    if merged:
        with connection.cursor() as cursor:
            cursor.executemany(_sql(_UPSERT), merged)


def _copy(rows: list[tuple[Any, ...]]) -> None:
    if not rows:
        return
    types = ["int8", "int4", "int8", "int4", "int4", "float8", "float8", "float8", "int8"]
    with connection.cursor() as cursor, cursor.copy(_sql(_COPY)) as copy:
        copy.set_types(types)
        for row in rows:
            copy.write_row(row)


def truncate(series_ids: list[int], step: int) -> None:
    """Make the series' blocks match their points once those after ``step`` are deleted."""
    if not series_ids:
        return
    delete = _sql(_DELETE_FROM, len(series_ids))
    with connection.cursor() as cursor:
        for size in SIZES:
            cursor.execute(delete, [*series_ids, size, step - step % size])
    # The block holding ``step`` keeps its points up to it, at every size: recount them
    # from the points of the coarsest (which hold those of the finer ones).
    since = step - step % SIZES[0]
    recounted: Blocks = {}
    for series_id in series_ids:
        recounted.update(aggregate(series_id, chunks.between(series_id, since, step)))
    kept = [
        (series_id, size, start, *block)
        for (series_id, size, start), block in recounted.items()
        if start == step - step % size
    ]
    if kept:
        with connection.cursor() as cursor:
            cursor.executemany(_sql(_UPSERT), kept)
