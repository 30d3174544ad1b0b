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

from typing import Any, NamedTuple

import numpy as np
from django.db import connection

from npulab.core.sql import server_cursor, table_name
from npulab.series import arrays, chunks
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
# Each column's dtype in ``Blocks``.
_KINDS = (np.int64,) * 5 + (np.float64,) * 3 + (np.int64,)


class Blocks(NamedTuple):
    """Blocks as columns, a row per (series, size, start), in the table's column order.

    ``total``, ``minimum`` and ``maximum`` are NaN where the block has no finite value
    (``counted`` is 0), as SQL's SUM/MIN/MAX give NULL: they are stored as NULL. A
    training batch has about a hundred blocks a thousand points: kept as arrays, they go
    to the database without a Python object each.
    """

    series_id: np.ndarray
    size: np.ndarray
    start: np.ndarray
    points: np.ndarray
    counted: np.ndarray
    total: np.ndarray
    minimum: np.ndarray
    maximum: np.ndarray
    first_step: np.ndarray

    def __len__(self) -> int:
        return len(self.start)

    def where(self, mask: np.ndarray) -> Blocks:
        return Blocks(*(column[mask] for column in self))

    def rows(self) -> list[tuple[Any, ...]]:
        """The blocks as rows of Python values, None for NULL."""
        columns = [column.tolist() for column in self]
        for column in columns[5:8]:
            column[:] = [None if value != value else value for value in column]  # NaN
        return list(zip(*columns, strict=True))


def concatenate(parts: list[Blocks]) -> Blocks:
    """The blocks of several series (or sizes) as one."""
    if not parts:
        return Blocks(*(np.empty(0, kind) for kind in _KINDS))
    return Blocks(*(np.concatenate(column) for column in zip(*parts, strict=True)))


_COLUMNS = "series_id, size, start, points, counted, total, minimum, maximum, first_step"


# Merging a batch's block into a stored one. PostgreSQL's LEAST/GREATEST
# skip NULLs, SQLite's two-argument MIN/MAX return NULL: hence the COALESCEs.
_MERGE = """
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
_UPSERT = "INSERT INTO {rollup} ({columns}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) {merge}"
# A batch's blocks in one statement, a column an array: those that start after their series'
# last step are new and inserted, the others (``stored``) merged into what may be there.
_STORE = """
    WITH block ({columns}, stored) AS (
        SELECT * FROM unnest(%s::int8[], %s::int4[], %s::int8[], %s::int4[], %s::int4[],
            %s::float8[], %s::float8[], %s::float8[], %s::int8[], %s::bool[])
    ),
    fresh AS (
        INSERT INTO {rollup} ({columns}) SELECT {values} FROM block WHERE NOT stored
    )
    INSERT INTO {rollup} ({columns}) SELECT {values} FROM block WHERE stored {merge}
"""
# No finite value is NaN in the arrays, NULL in the table.
_VALUES = (
    "series_id, size, start, points, counted, NULLIF(total, 'NaN'), "
    "NULLIF(minimum, 'NaN'), NULLIF(maximum, 'NaN'), first_step"
)
_INT4 = {"size", "points", "counted"}
# {ids} is one placeholder per series: an owner has tens or hundreds, and IN (...) is the one
# spelling of a list that PostgreSQL and SQLite share.
_DELETE_FROM = """
    DELETE FROM {rollup} WHERE series_id IN ({ids}) AND size = %s AND start >= %s
"""


def _sql(template: str, ids: int = 0) -> str:
    postgres = connection.vendor == "postgresql"
    return template.replace("{merge}", _MERGE).format(
        rollup=table_name(MetricRollup),
        columns=_COLUMNS,
        values=_VALUES,
        least="LEAST" if postgres else "MIN",
        greatest="GREATEST" if postgres else "MAX",
        ids=", ".join(["%s"] * ids),
    )


def aggregate(series_id: int, points: Points) -> Blocks:
    """The blocks of one batch of points in step order, at every size."""
    if not len(points):
        return concatenate([])
    finite = ~np.isnan(points.values)
    totals = np.where(finite, points.values, 0.0)
    parts = []
    for size in SIZES:
        starts = points.steps - points.steps % size
        edges = np.flatnonzero(np.concatenate(([True], starts[1:] != starts[:-1])))
        counted = np.add.reduceat(finite, edges, dtype=np.int64)
        parts.append(
            Blocks(
                np.full(len(edges), series_id, np.int64),
                np.full(len(edges), size, np.int64),
                starts[edges],
                np.diff(np.append(edges, len(points))),
                counted,
                np.where(counted > 0, np.add.reduceat(totals, edges), np.nan),
                np.fmin.reduceat(points.values, edges),
                np.fmax.reduceat(points.values, edges),
                points.steps[edges],
            )
        )
    return concatenate(parts)


def store(blocks: Blocks, last_steps: dict[int, int | None]) -> None:
    """Add a batch's blocks to the stored ones.

    ``last_steps`` is each series' last stored step before this batch: a
    block that starts after it cannot exist yet and is inserted; one that may
    exist is merged into the stored one (SQLite merges every block). On PostgreSQL
    in one statement, the blocks as arrays, where a COPY of the new ones and a merge
    of the others had cost three round trips and an object a block
    (docs/benchmarks.md).
    """
    if not len(blocks):
        return
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.executemany(_sql(_UPSERT), blocks.rows())
        return
    stored = np.zeros(len(blocks), bool)
    for series_id, last in last_steps.items():
        if last is not None:
            stored |= (blocks.series_id == series_id) & (blocks.start <= last)
    columns = [
        column.astype(np.int32) if name in _INT4 else column
        for name, column in zip(Blocks._fields, blocks, strict=True)
    ]
    with server_cursor() as cursor:
        arrays.register(cursor)
        cursor.execute(_sql(_STORE), [arrays.array(column) for column in (*columns, stored)])


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
    recounted = [aggregate(pk, chunks.between(pk, since, step)) for pk in series_ids]
    blocks = concatenate(recounted)
    kept = blocks.where(blocks.start == step - step % blocks.size).rows()
    if kept:
        with connection.cursor() as cursor:
            cursor.executemany(_sql(_UPSERT), kept)
