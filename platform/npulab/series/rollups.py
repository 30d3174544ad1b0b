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

from collections.abc import Iterable
from typing import Any

from django.db import connection

from npulab.series.models import Metric, MetricRollup

# Largest first: a chart takes the coarsest blocks its bucket width allows.
# Each size is ten times the next, so a bucket never reads more than ten
# blocks (or, under the finest, ten points) of what it covers, at any
# resolution (issue 15: a bucket narrower than a 1,000-step block used to
# fall back to 100 blocks of 10).
SIZES = (10_000, 1_000, 100, 10)
_FINE = SIZES[-1]

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
_RECOUNT = """
    INSERT INTO {rollup} ({columns})
    SELECT series_id, %s, %s, COUNT(*), COUNT(value), SUM(value), MIN(value), MAX(value),
           MIN(step)
    FROM {metric}
    WHERE series_id IN ({ids}) AND step >= %s AND step <= %s
    GROUP BY series_id
"""


def _sql(template: str, ids: int = 0) -> str:
    quote = connection.ops.quote_name
    postgres = connection.vendor == "postgresql"
    return template.format(
        rollup=quote(MetricRollup._meta.db_table),
        metric=quote(Metric._meta.db_table),
        columns=_COLUMNS,
        least="LEAST" if postgres else "MIN",
        greatest="GREATEST" if postgres else "MAX",
        ids=", ".join(["%s"] * ids),
    )


def aggregate(series_id: int, points: Iterable[tuple[int, float | None, float]]) -> Blocks:
    """The blocks of one batch of (step, value, time) points, at every size."""
    fine: dict[int, Block] = {}
    for step, value, _ in points:
        start = step - step % _FINE
        block = fine.get(start)
        if block is None:
            fine[start] = [1, 0 if value is None else 1, value, value, value, step]
        else:
            _add_point(block, step, value)
    blocks: Blocks = {(series_id, _FINE, start): block for start, block in fine.items()}
    level = fine
    for size in reversed(SIZES[:-1]):
        # Each level is the union of the one below it: a size divides every larger size.
        coarser: dict[int, Block] = {}
        for start, block in level.items():
            key = start - start % size
            found = coarser.get(key)
            if found is None:
                coarser[key] = list(block)
            else:
                _merge(found, block)
        blocks.update(((series_id, size, start), block) for start, block in coarser.items())
        level = coarser
    return blocks


def _add_point(block: Block, step: int, value: float | None) -> None:
    block[0] += 1
    if step < block[5]:
        block[5] = step
    if value is None:
        return
    if block[1] == 0:
        block[1:5] = [1, value, value, value]
        return
    block[1] += 1
    block[2] += value
    if value < block[3]:
        block[3] = value
    elif value > block[4]:
        block[4] = value


def _merge(into: Block, other: Block) -> None:
    into[0] += other[0]
    into[5] = min(into[5], other[5])
    if other[1] == 0:
        return
    if into[1] == 0:
        into[1:5] = other[1:5]
        return
    into[1] += other[1]
    into[2] += other[2]
    into[3] = min(into[3], other[3])
    into[4] = max(into[4], other[4])


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
    delete, recount = _sql(_DELETE_FROM, len(series_ids)), _sql(_RECOUNT, len(series_ids))
    with connection.cursor() as cursor:
        for size in SIZES:
            start = step - step % size
            cursor.execute(delete, [*series_ids, size, start])
            # The block holding ``step`` keeps its points up to it: recount them.
            cursor.execute(recount, [size, start, *series_ids, start, step])
