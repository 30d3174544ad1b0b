"""A step series' points in chunks: one row per series and batch, its points as three arrays.

A row per point cost a training run's batch of a thousand points more in the database
(a heap tuple and two index entries each) than everything else the request does, and
170 bytes a point on disk. A chunk holds up to ``MAX_POINTS`` points sorted by step, as one
binary value (steps int64, then values and times float64, little-endian; NaN where a value
was NaN or infinite): about 20 bytes a point once PostgreSQL's lz4 has it, written as one
row and read back with one ``numpy.frombuffer``.

The same bytes on every database: SQLite stores them as a BLOB. Chunks of one series may
overlap in steps (a step logged again, a loop that logs out of order); a read merges them
in the order they were stored, so a repeated step's points keep that order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
from django.db import connection

from npulab.core.sql import fetch_rows, server_cursor, table_name
from npulab.series.models import MetricChunk

# 240 kB a chunk: a batch larger than this is stored as several.
MAX_POINTS = 10_000
_STEP = np.dtype("<i8")
_FLOAT = np.dtype("<f8")
# Chunks read per query: the first query of a read asks for a few, each next one for twice
# as many, up to the most. A page of a whole read stops at the chunk after its last: with
# a group of 32 from the start, a page of ten 10,000-point chunks fetched 32 of them, and a
# whole read of a million points three times its bytes; now it fetches twelve.
_FIRST_GROUP, _GROUP = 4, 32
FIRST, LAST = -(2**63), 2**63 - 1

_INSERT = "INSERT INTO {chunk} (series_id, attempt, first_step, last_step, points, data) VALUES "
_ROW = "(%s, %s, %s, %s, %s, %s)"
# Rows an INSERT: a batch has a chunk per series, and a statement's parameters are limited
# (999 on an older SQLite).
_ROWS_PER_INSERT = 100
# Keyset pages, the same spelling on PostgreSQL and SQLite: each row is its id, its key in
# the order read, then its first step, point count and data (``_keyset``).
_SPANNING = """
    SELECT id, first_step, first_step, points, data FROM {chunk}
    WHERE series_id = %s AND last_step >= %s AND first_step <= %s
        AND (first_step > %s OR (first_step = %s AND id > %s))
    ORDER BY first_step, id LIMIT %s
"""
_NEWEST = """
    SELECT id, last_step, first_step, points, data FROM {chunk}
    WHERE series_id = %s AND attempt = %s
        AND (last_step < %s OR (last_step = %s AND id < %s))
    ORDER BY last_step DESC, id DESC LIMIT %s
"""


class Points(NamedTuple):
    """Points as columns: steps (int64), values (float64, NaN for none), times (float64)."""

    steps: np.ndarray
    values: np.ndarray
    times: np.ndarray

    def __len__(self) -> int:
        return len(self.steps)

    def where(self, mask: np.ndarray | slice) -> Points:
        return Points(self.steps[mask], self.values[mask], self.times[mask])


def empty() -> Points:
    return Points(np.empty(0, np.int64), np.empty(0), np.empty(0))


def columns(points: Sequence[tuple[int, float | None, float]]) -> Points:
    """A batch's (step, value or None, time) points as columns in step order; a step logged
    twice keeps its points in the order they came."""
    steps, values, times = zip(*points, strict=True) if points else ((), (), ())
    # None becomes NaN in a float array.
    found = Points(
        np.array(steps, np.int64), np.array(values, np.float64), np.array(times, np.float64)
    )
    if len(found) > 1 and not np.all(found.steps[1:] >= found.steps[:-1]):
        found = found.where(np.argsort(found.steps, kind="stable"))
    return found


def joined(parts: list[Points]) -> Points:
    """Several parts of a batch's points of one series, in step order; a step logged twice
    keeps its points in the order of the parts, then of each part."""
    if len(parts) == 1:
        found = parts[0]
    else:
        found = Points(*(np.concatenate(column) for column in zip(*parts, strict=True)))
    if len(found) > 1 and not np.all(found.steps[1:] >= found.steps[:-1]):
        found = found.where(np.argsort(found.steps, kind="stable"))
    return found


def write(series_id: int, attempt: int, points: Points) -> list[tuple]:
    """The rows (as ``insert`` takes them) that store ``points``, sorted by step."""
    rows = []
    for start in range(0, len(points), MAX_POINTS):
        part = points.where(slice(start, start + MAX_POINTS))
        first, last = int(part.steps[0]), int(part.steps[-1])
        rows.append((series_id, attempt, first, last, len(part), pack(part)))
    return rows


def pack(points: Points) -> bytes:
    """A chunk's stored bytes: its steps, then its values, then its times."""
    return b"".join(
        (
            points.steps.astype(_STEP).tobytes(),
            points.values.astype(_FLOAT).tobytes(),
            points.times.astype(_FLOAT).tobytes(),
        )
    )


def insert(rows: list[tuple]) -> None:
    """Store chunk rows made by ``write``, a statement for up to ``_ROWS_PER_INSERT``; on
    PostgreSQL with the data as binary, not as a hex literal twice its size in the SQL."""
    if not rows:
        return
    postgres = connection.vendor == "postgresql"
    with server_cursor() if postgres else connection.cursor() as cursor:
        for first in range(0, len(rows), _ROWS_PER_INSERT):
            group = rows[first : first + _ROWS_PER_INSERT]
            sql = _sql(_INSERT) + ", ".join([_ROW] * len(group))
            cursor.execute(sql, [value for row in group for value in row])


def unpack(data: bytes | memoryview, points: int) -> Points:
    """A chunk's stored bytes as columns."""
    width = points * 8
    # Views of the bytes where the machine is little-endian, as they all are in practice.
    return Points(
        np.frombuffer(data, _STEP, points, 0).astype(np.int64, copy=False),
        np.frombuffer(data, _FLOAT, points, width).astype(np.float64, copy=False),
        np.frombuffer(data, _FLOAT, points, 2 * width).astype(np.float64, copy=False),
    )


class Stored(NamedTuple):
    """A chunk as a read finds it: its id, first step and points."""

    pk: int
    first_step: int
    points: Points


def spanning(series_id: int, low: int = FIRST, high: int = LAST) -> Iterator[Stored]:
    """The series' chunks that may hold a step from ``low`` to ``high``, in order of first
    step (then of storing), read a group at a time."""
    return _keyset(_SPANNING, [series_id, low, high], FIRST, 0)


def newest(series_id: int, attempt: int) -> Iterator[Stored]:
    """The chunks ``attempt`` logged to the series, the one with the highest last step (then
    the last stored) first, read a group at a time."""
    return _keyset(_NEWEST, [series_id, attempt], LAST, LAST)


def _keyset(template: str, params: list[Any], key: int, pk: int) -> Iterator[Stored]:
    """The chunks of ``template``'s rows after (``key``, ``pk``), a group a query."""
    sql = _sql(template)
    group = _FIRST_GROUP
    while True:
        rows = fetch_rows(sql, [*params, key, key, pk, group])
        for row_pk, _, first, count, data in rows:
            yield Stored(row_pk, first, unpack(data, count))
        if len(rows) < group:
            return
        pk, key = rows[-1][:2]
        group = min(2 * group, _GROUP)


def merged(chunks: list[Stored]) -> Points:
    """The chunks' points in step order; a repeated step's in the order they were stored."""
    if not chunks:
        return empty()
    stored = [chunk.points for chunk in sorted(chunks, key=lambda chunk: chunk.pk)]
    found = Points(*(np.concatenate(column) for column in zip(*stored, strict=True)))
    if not np.all(found.steps[1:] >= found.steps[:-1]):
        found = found.where(np.argsort(found.steps, kind="stable"))
    return found


def between(series_id: int, low: int, high: int) -> Points:
    """The series' points with a step from ``low`` to ``high``, in step order."""
    found = merged(list(spanning(series_id, low, high)))
    return found.where((found.steps >= low) & (found.steps <= high))


def _sql(template: str) -> str:
    return template.format(chunk=table_name(MetricChunk))
