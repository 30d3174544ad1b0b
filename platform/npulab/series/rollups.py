"""Block aggregates of metric series, so a chart of a million points reads a thousand blocks.

Every series has, for each size in SIZES, a block for each span of ``size`` steps that holds
points: count, finite count, sum, min, max and first step. The blocks of a series and size
are stored as arrays, up to ``SEGMENT`` consecutive ones a row (MetricRollupSegment), read
back with one ``numpy.frombuffer`` a row, as the points' chunks are. Ingestion adds each
batch's blocks (``aggregate`` then ``store``, which merges them into the rows they fall
in); a resume cuts them back with the points (``truncate``). A chart bucket that spans whole
blocks is the combination of those blocks, which is exactly what the points would give (the
mean as sum over count): reads combine them (npulab.series.reads).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from django.db import connection

from npulab.core.sql import fetch_rows, server_cursor, table_name
from npulab.series import chunks
from npulab.series.chunks import Points
from npulab.series.models import MetricRollupSegment

# Largest first: a chart takes the coarsest blocks its bucket width allows.
# Each size is ten times the next, so a bucket never reads more than ten
# blocks (or, under the finest, ten points) of what it covers, at any
# resolution (issue 15: a bucket narrower than a 1,000-step block used to
# fall back to 100 blocks of 10).
SIZES = (10_000, 1_000, 100, 10)
# The lowest step a point may have: the start of its coarsest block (a multiple of the size,
# rounding down) must still be a 64-bit integer.
LOWEST_STEP = -(2**63) + SIZES[0]
# Blocks a row holds at most (12 kB). A chart of 2,500 buckets of a million steps reads
# 10,000 blocks: 40 rows. A batch rewrites the rows its blocks fall in (a training loop's:
# the last of each size), and rows four times as large made that most of its cost on SQLite.
SEGMENT = 256
# A row's data: its blocks' first steps, point counts and finite counts (int64), then their
# sums, minimums and maximums (float64, NaN where the block has no finite value), each
# column whole before the next, little-endian.
_COLUMNS = 6
_WORD = np.dtype("<i8")
_FLOAT = np.dtype("<f8")
# Rows a statement reads or writes: their parameters stay under SQLite's oldest limit (999).
_PER_STATEMENT = 100


class Blocks(NamedTuple):
    """Blocks as columns, one per (series, size, start).

    ``total``, ``minimum`` and ``maximum`` are NaN where the block has no finite value
    (``counted`` is 0). A training batch has about a hundred blocks a thousand points:
    kept as arrays, they reach the database without a Python object each.
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


_KINDS = (np.int64,) * 5 + (np.float64,) * 3 + (np.int64,)


def concatenate(parts: list[Blocks]) -> Blocks:
    """The blocks of several series (or sizes) as one."""
    if not parts:
        return Blocks(*(np.empty(0, kind) for kind in _KINDS))
    return Blocks(*(np.concatenate(column) for column in zip(*parts, strict=True)))


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
    """Merge a batch's blocks (as ``aggregate`` gives them: a series' blocks of a size
    together, by start) into the stored ones.

    The rows the blocks fall in are read, combined with them and written back: a statement
    each way, whatever the number of series. ``last_steps`` is each series' last stored step
    before this batch: a row that starts after it cannot exist yet and is not looked for.
    """
    if not len(blocks):
        return
    segment = blocks.start // (blocks.size * SEGMENT)
    begins = _edges(blocks.series_id, blocks.size)
    ends = [*(begins[1:] - 1).tolist(), len(blocks) - 1]
    spans = []
    for begin, end in zip(begins.tolist(), ends, strict=True):
        series_id, size = int(blocks.series_id[begin]), int(blocks.size[begin])
        last = last_steps.get(series_id)
        low = int(segment[begin])
        if last is not None and last // (size * SEGMENT) >= low:
            spans.append((series_id, size, low, min(int(segment[end]), last // (size * SEGMENT))))
    _write(_combined(concatenate([_read(spans), blocks])))


def truncate(series_ids: list[int], step: int) -> None:
    """Make the series' blocks match their points once those after ``step`` are deleted."""
    if not series_ids:
        return
    # The block holding ``step`` keeps its points up to it, at every size: recounted from the
    # points of the coarsest (which hold those of the finer ones); the blocks before it in
    # its row stay.
    holding = [
        (pk, size, step // (size * SEGMENT), step // (size * SEGMENT))
        for pk in series_ids
        for size in SIZES
    ]
    stored = _read(holding)
    kept = stored.where(stored.start < step - step % stored.size)
    since = step - step % SIZES[0]
    recounted = concatenate([aggregate(pk, chunks.between(pk, since, step)) for pk in series_ids])
    recounted = recounted.where(recounted.start == step - step % recounted.size)
    ids = ", ".join(["%s"] * len(series_ids))
    with connection.cursor() as cursor:
        for size in SIZES:
            cursor.execute(
                _sql(_DELETE_FROM, ids=ids), [*series_ids, size, step // (size * SEGMENT)]
            )
    _write(_combined(concatenate([kept, recounted])))


def read(series_id: int, size: int) -> tuple[np.ndarray, ...]:
    """The series' blocks of ``size`` in step order, as five columns: first step, finite
    count, sum (0 where a block has no finite value), minimum and maximum (NaN there)."""
    rows = fetch_rows(_sql(_SERIES), [series_id, size])
    if not rows:
        return (np.empty(0, np.int64), np.empty(0, np.int64), *([np.empty(0)] * 3))
    table = np.concatenate([_unpack(data, count) for count, data in rows], axis=1)
    total, minimum, maximum = table[3:].view(_FLOAT)
    return table[0], table[2], np.where(table[2] > 0, total, 0.0), minimum, maximum


_SELECT = "SELECT series_id, size, blocks, data FROM {rollup} WHERE "
_SPAN = "(series_id = %s AND size = %s AND segment BETWEEN %s AND %s)"
_SERIES = "SELECT blocks, data FROM {rollup} WHERE series_id = %s AND size = %s ORDER BY segment"
# A row is replaced whole: the combined blocks hold what it held.
_UPSERT = """
    INSERT INTO {rollup} (series_id, size, segment, blocks, data) VALUES {rows}
    ON CONFLICT (series_id, size, segment) DO UPDATE SET
        blocks = excluded.blocks, data = excluded.data
"""
# {ids} is one placeholder per series: IN (...) is the one spelling of a list that
# PostgreSQL and SQLite share.
_DELETE_FROM = "DELETE FROM {rollup} WHERE series_id IN ({ids}) AND size = %s AND segment >= %s"


def _sql(template: str, **names: str) -> str:
    return template.format(rollup=table_name(MetricRollupSegment), **names)


def _read(spans: list[tuple[int, int, int, int]]) -> Blocks:
    """The stored blocks of each (series, size, lowest row, highest row) in ``spans``."""
    rows = []
    for first in range(0, len(spans), _PER_STATEMENT):
        group = spans[first : first + _PER_STATEMENT]
        sql = _sql(_SELECT) + " OR ".join([_SPAN] * len(group))
        rows += fetch_rows(sql, [value for span in group for value in span])
    if not rows:
        return concatenate([])
    series_ids, sizes, counts, _ = zip(*rows, strict=True)
    table = np.concatenate([_unpack(one, count) for _, _, count, one in rows], axis=1)
    size = np.repeat(np.array(sizes, np.int64), counts)
    first_step = table[0]
    total, minimum, maximum = table[3:].view(_FLOAT)
    return Blocks(
        np.repeat(np.array(series_ids, np.int64), counts),
        size,
        first_step - first_step % size,
        table[1],
        table[2],
        total,
        minimum,
        maximum,
        first_step,
    )


def _combined(blocks: Blocks) -> Blocks:
    """``blocks`` ordered by series, size and start, those of one start combined into one in
    the order given (a stored block, then the batch's)."""
    order = np.lexsort((np.arange(len(blocks)), blocks.start, blocks.size, blocks.series_id))
    ordered = blocks.where(order)
    edges = _edges(ordered.series_id, ordered.size, ordered.start)
    if len(edges) == len(ordered):
        return ordered
    counted = np.add.reduceat(ordered.counted, edges)
    # -0.0, not 0.0, for a block without a sum: it adds nothing, not even to a -0.0.
    totals = np.add.reduceat(np.where(np.isnan(ordered.total), -0.0, ordered.total), edges)
    return Blocks(
        ordered.series_id[edges],
        ordered.size[edges],
        ordered.start[edges],
        np.add.reduceat(ordered.points, edges),
        counted,
        np.where(counted > 0, totals, np.nan),
        np.fmin.reduceat(ordered.minimum, edges),
        np.fmax.reduceat(ordered.maximum, edges),
        np.minimum.reduceat(ordered.first_step, edges),
    )


def _edges(*keys: np.ndarray) -> np.ndarray:
    """Where a run of equal keys begins, in columns sorted by them."""
    changed = np.zeros(len(keys[0]), bool)
    changed[:1] = True
    for key in keys:
        changed[1:] |= key[1:] != key[:-1]
    return np.flatnonzero(changed)


def _write(blocks: Blocks) -> None:
    """Store ``blocks`` (ordered by series, size and start, one a start) as the rows they
    fall in, each replacing what that row held."""
    if not len(blocks):
        return
    segment = blocks.start // (blocks.size * SEGMENT)
    edges = _edges(blocks.series_id, blocks.size, segment)
    table = np.empty((_COLUMNS, len(blocks)), _WORD)
    table[:3] = blocks.first_step, blocks.points, blocks.counted
    table[3:].view(_FLOAT)[:] = blocks.total, blocks.minimum, blocks.maximum
    ends = [*edges[1:].tolist(), len(blocks)]
    rows = [
        (
            int(blocks.series_id[begin]),
            int(blocks.size[begin]),
            int(segment[begin]),
            end - begin,
            table[:, begin:end].tobytes(),
        )
        for begin, end in zip(edges.tolist(), ends, strict=True)
    ]
    postgres = connection.vendor == "postgresql"
    with server_cursor() if postgres else connection.cursor() as cursor:
        for first in range(0, len(rows), _PER_STATEMENT):
            group = rows[first : first + _PER_STATEMENT]
            sql = _sql(_UPSERT, rows=", ".join(["(%s, %s, %s, %s, %s)"] * len(group)))
            cursor.execute(sql, [value for row in group for value in row])


def _unpack(data: bytes | memoryview, count: int) -> np.ndarray:
    """A row's data as its six columns, a row of the table each (floats as their bits)."""
    return np.frombuffer(data, _WORD, _COLUMNS * count).reshape(_COLUMNS, count)
