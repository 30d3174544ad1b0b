"""Writing metric points in bulk, and cutting them back when a run resumes.

A training run sends points in batches of thousands; the platform must take a hundred
thousand a second from one client. A run's batch is stored as one chunk row per series
(npulab.series.chunks) with its rollup blocks (npulab.series.rollups); a host's telemetry, a
few points for each of a hundred series, as a row a point, in one COPY for all of them on
PostgreSQL; other databases get executemany.

The caller serializes the batches of one owner (do_ingest_events holds the run's row lock):
rollups.store reads the rows of blocks a batch falls in and writes them back merged, and two
interleaved batches would lose each other's counts.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from django.db import connection
from django.db.models import Max, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Coalesce

from npulab.core.sql import column_name, fetch_rows, table_name
from npulab.series import chunks, rollups
from npulab.series.chunks import Points
from npulab.series.models import Metric, MetricChunk, MetricRollupSegment, MetricSeries
from npulab.series.owners import Owner

# (step, value or None for NaN/inf, Unix seconds)
Point = tuple[int, float | None, float]

_COPY = "COPY {table} (series_id, step, value, time) FROM STDIN (FORMAT BINARY)"
_INSERT = "INSERT INTO {table} (series_id, step, value, time) VALUES (%s, %s, %s, %s)"
# PostgreSQL's binary COPY: a header, per row the field count and each
# field as length + big-endian bytes (length -1 for NULL), a -1 trailer.
_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
_TRAILER = struct.pack(">h", -1)
_ROW = struct.Struct(">hiqiqidid").pack
_ROW_NULL = struct.Struct(">hiqiqiid").pack
_SERIES_FIELDS = ("pk", "run_id", "host_id", "device_index", "key", "last_step")


class _SeriesRow(NamedTuple):
    """What a batch needs of a series: its id and last step, and its owner and key to find it.

    Read as plain rows: a telemetry batch looks up a hundred series, and building model
    instances cost more than the query.
    """

    pk: int
    run_id: int | None
    host_id: int | None
    device_index: int | None
    key: str
    last_step: int | None

    @classmethod
    def of(cls, series: MetricSeries) -> _SeriesRow:
        return cls(*(getattr(series, name) for name in _SERIES_FIELDS))


# (series id, points added, highest step added)
_Count = tuple[int, int, int]


def insert_points(owner: Owner, points: dict[str, list[Point]], *, attempt: int = 0) -> None:
    """Store a batch of step series' points by key, with their rollups and series counts.

    ``attempt`` is the run attempt that logged them; a host's series has none (0).
    """
    insert_columns(
        owner,
        {key: chunks.columns(batch) for key, batch in points.items() if batch},
        attempt=attempt,
    )


def insert_columns(owner: Owner, points: dict[str, Points], *, attempt: int = 0) -> None:
    """``insert_points`` of points already in columns, each key's in step order."""
    found = {key: columns for key, columns in points.items() if len(columns)}
    if not found:
        return
    added = {key: (len(columns), int(columns.steps[-1])) for key, columns in found.items()}
    if connection.vendor == "postgresql":
        series = _counted_series(owner, added)
    else:
        series = _series(owner, list(found))
        _add_counts([(series[key].pk, n, high) for key, (n, high) in added.items()])
    rows: list[tuple] = []
    blocks = []
    for key, columns in found.items():
        pk = series[key].pk
        rows += chunks.write(pk, attempt, columns)
        blocks.append(rollups.aggregate(pk, columns))
    chunks.insert(rows)
    rollups.store(rollups.concatenate(blocks), {row.pk: row.last_step for row in series.values()})


def _counted_series(owner: Owner, added: dict[str, tuple[int, int]]) -> dict[str, _SeriesRow]:
    """Each key's series with its last step before this batch, the batch's points added to
    its counts: one statement for the stored series (a run's batch pays for every query it
    makes), an INSERT for the new ones, created with their counts."""
    fields = owner.fields()
    where, owned = owner.condition("s")
    rows = ", ".join(["(%s, %s::bigint, %s::bigint)"] * len(added))
    params = [value for key, (n, high) in added.items() for value in (key, n, high)]
    params += owned
    with connection.cursor() as cursor:
        sql = _COUNTED.format(table=table_name(MetricSeries), rows=rows, owner=where)
        cursor.execute(sql, params)
        stored = cursor.fetchall()
    named = (fields.get("run_id"), fields.get("host_id"), fields.get("device_index"))
    found = {key: _SeriesRow(pk, *named, key, last) for pk, key, last in stored}
    missing = [
        MetricSeries(**fields, key=key, points=n, last_step=high)
        for key, (n, high) in added.items()
        if key not in found
    ]
    for created in MetricSeries.objects.bulk_create(missing):
        found[created.key] = _SeriesRow.of(created)._replace(last_step=None)
    return found


def insert_samples(batches: dict[Owner, dict[str, list[Point]]]) -> None:
    """Store timed points (a host's telemetry: steps are Unix seconds) of several owners at
    once, a row a point: one COPY for all of them, not one per owner.

    A host's telemetry is one batch for eight devices: eight owners, a few points each. Such
    a series has no step rollups (npulab.telemetry keeps minutes of its own) and is read by
    time range, never by ``reads``. The counts are added in the database (``points = points
    + n``), so a concurrent delete of old points keeps its own. The caller serializes the
    batches of each owner, as for ``insert_points``.
    """
    batches = {owner: points for owner, points in batches.items() if points}
    if not batches:
        return
    found = _series_many(batches)
    rows: list[tuple[int, list[Point]]] = []
    for owner, points in batches.items():
        rows += [(found[(_owner_key(owner), key)].pk, batch) for key, batch in points.items()]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor, cursor.copy(_sql(_COPY)) as copy:
            copy.write(b"".join(_binary_rows(rows)))
    else:
        with connection.cursor() as cursor:
            cursor.executemany(
                _sql(_INSERT),
                [(pk, step, value, time) for pk, batch in rows for step, value, time in batch],
            )
    _add_counts([(pk, len(batch), max(step for step, _, _ in batch)) for pk, batch in rows])


def _add_counts(counts: list[_Count]) -> None:
    """Add each batch's points to its series' count and raise its last step, in the database.

    On PostgreSQL one UPDATE for all the series, after locking them: a host's telemetry batch
    touches a hundred series, and a statement each cost more than its points (a run's batch
    counts its series as it finds them, in ``_counted_series``). For one series, and on
    SQLite, one plain UPDATE per series, sent together (bulk_update's CASE per field and row
    cost more to build than a small batch to store).
    """
    # In id order, whoever else updates several series at once does too: no deadlock.
    counts = sorted(counts)
    table = table_name(MetricSeries)
    with connection.cursor() as cursor:
        if connection.vendor != "postgresql" or len(counts) == 1:
            cursor.executemany(
                _COUNT.format(table=table), [(n, high, high, pk) for pk, n, high in counts]
            )
            return
        ids = [pk for pk, _, _ in counts]
        marks = ", ".join(["%s"] * len(ids))
        cursor.execute(_LOCK_SERIES.format(table=table, ids=marks), ids)
        rows = ", ".join(["(%s, %s, %s)"] * len(counts))
        cursor.execute(
            _COUNTS.format(table=table, rows=rows), [value for row in counts for value in row]
        )


# Portable (no GREATEST on SQLite): a batch only ever raises a series' last step.
_COUNT = """
    UPDATE {table} SET points = points + %s,
        last_step = CASE WHEN last_step IS NULL OR last_step < %s THEN %s ELSE last_step END
    WHERE id = %s
"""
# The counts of a batch's stored series, returning their last steps from before it: the rows
# are locked first, in id order, as every update of several series takes them.
_COUNTED = """
    WITH batch (key, n, high) AS (VALUES {rows}),
    old AS (
        SELECT s.id, s.key, s.last_step FROM {table} AS s JOIN batch ON batch.key = s.key
        WHERE {owner} ORDER BY s.id FOR UPDATE OF s
    )
    UPDATE {table} AS s
    SET points = s.points + batch.n, last_step = GREATEST(s.last_step, batch.high)
    FROM old JOIN batch ON batch.key = old.key WHERE s.id = old.id
    RETURNING s.id, old.key, old.last_step
"""
# The row locks in id order: the UPDATE's join would take them in whatever order its plan has.
_LOCK_SERIES = "SELECT 1 FROM {table} WHERE id IN ({ids}) ORDER BY id FOR UPDATE"
# GREATEST skips a NULL last step.
_COUNTS = """
    UPDATE {table} AS s SET points = s.points + v.n, last_step = GREATEST(s.last_step, v.high)
    FROM (VALUES {rows}) AS v (id, n, high) WHERE s.id = v.id
"""


def _series_many(batches: dict[Owner, dict[str, list[Point]]]) -> dict[tuple, _SeriesRow]:
    """Each (owner, key)'s series, created where missing: two queries for all the owners.

    The owners of a batch are mostly one host's devices: asked for as that host's series
    of those keys (one condition per host or run), the few of its other devices that match
    too are left out here.
    """
    keys_of: dict[tuple[str, int], set[str]] = {}
    for owner, points in batches.items():
        parent = (
            ("run_id", owner.run_id) if owner.run_id is not None else ("host_id", owner.host_id)
        )
        keys_of.setdefault(parent, set()).update(points)
    wanted = Q()
    for (field, value), keys in keys_of.items():
        wanted |= Q(**{field: value, "key__in": sorted(keys)})
    rows = map(_SeriesRow._make, MetricSeries.objects.filter(wanted).values_list(*_SERIES_FIELDS))
    found = {(_row_owner(row), row.key): row for row in rows}
    missing = [
        MetricSeries(**owner.fields(), key=key)
        for owner, points in batches.items()
        for key in points
        if (_owner_key(owner), key) not in found
    ]
    for created in map(_SeriesRow.of, MetricSeries.objects.bulk_create(missing)):
        found[(_row_owner(created), created.key)] = created
    return found


def _owner_key(owner: Owner) -> tuple[int | None, int | None, int | None]:
    return (owner.run_id, owner.host_id, owner.device_index)


def _row_owner(row: _SeriesRow) -> tuple[int | None, int | None, int | None]:
    return (row.run_id, row.host_id, row.device_index)


def _series(owner: Owner, keys: list[str]) -> dict[str, _SeriesRow]:
    # One plain statement, as PostgreSQL's _counted_series: each batch of a run's points on
    # SQLite starts here, and compiling the queryset that said the same was about a quarter
    # of a 1,000-point request's CPU (docs/benchmarks.md, "A batch's series found in one
    # statement on SQLite").
    condition, params = owner.condition()
    sql = _SERIES_BY_KEY.format(
        columns=", ".join(column_name(MetricSeries, name) for name in _SERIES_FIELDS),
        table=table_name(MetricSeries),
        owner=condition,
        key=column_name(MetricSeries, "key"),
        keys=", ".join(["%s"] * len(keys)),
    )
    stored = fetch_rows(sql, [*params, *keys])
    found = {row.key: row for row in map(_SeriesRow._make, stored)}
    missing = [MetricSeries(**owner.fields(), key=key) for key in keys if key not in found]
    for created in map(_SeriesRow.of, MetricSeries.objects.bulk_create(missing)):
        found[created.key] = created
    return found


_SERIES_BY_KEY = "SELECT {columns} FROM {table} WHERE {owner} AND {key} IN ({keys})"


def _binary_rows(rows: list[tuple[int, list[Point]]]) -> Iterator[bytes]:
    yield _HEADER
    for series_id, batch in rows:
        for step, value, time in batch:
            if value is None:
                yield _ROW_NULL(4, 8, series_id, 8, step, -1, 8, time)
            else:
                yield _ROW(4, 8, series_id, 8, step, 8, value, 8, time)
    yield _TRAILER


def _sql(template: str) -> str:
    return template.format(table=table_name(Metric))


def drop_points_after(owner: Owner, step: int | None, keep_attempt: int | None = None) -> None:
    """Delete the owner's points after ``step`` (all for None); rollups and counts follow.

    ``keep_attempt``: the points that run attempt logged stay, whatever their step. The
    other hosts of a run across hosts send their ranks' points of a new attempt as they
    come, which may be before rank 0's resume is in: they were logged after it, not by
    the attempt it cuts back.
    """
    series = MetricSeries.objects.filter(**owner.fields())
    series_ids = list(series.values_list("pk", flat=True))
    older = MetricChunk.objects.filter(series__in=series_ids)
    if keep_attempt is not None:
        older = older.exclude(attempt=keep_attempt)
    if step is None:
        older.delete()
        MetricRollupSegment.objects.filter(series__in=series_ids).delete()
    else:
        older.filter(first_step__gt=step).delete()
        # The chunks that hold ``step`` and points after it keep their points up to it.
        for pk, points, data in older.filter(last_step__gt=step).values_list(
            "pk", "points", "data"
        ):
            stored = chunks.unpack(data, points)
            kept = stored.where(stored.steps <= step)
            MetricChunk.objects.filter(pk=pk).update(
                last_step=int(kept.steps[-1]), points=len(kept), data=chunks.pack(kept)
            )
        rollups.truncate(series_ids, step)
    if keep_attempt is not None:
        _roll_up_again(series_ids, keep_attempt, step)
    of_series = MetricChunk.objects.filter(series=OuterRef("pk")).order_by().values("series")
    total = of_series.annotate(total=Sum("points")).values("total")
    last = of_series.annotate(last=Max("last_step")).values("last")
    MetricSeries.objects.filter(pk__in=series_ids).update(
        points=Coalesce(Subquery(total), 0), last_step=Subquery(last)
    )


def _roll_up_again(series_ids: list[int], attempt: int, step: int | None) -> None:
    """Put the points ``attempt`` logged after ``step`` back into the blocks the cut removed.

    Only that attempt's points are left after ``step``; the block holding ``step`` was
    recounted from the points up to it, and these merge into it.
    """
    low = rollups.LOWEST_STEP if step is None else step + 1
    again = MetricChunk.objects.filter(series__in=series_ids, attempt=attempt, last_step__gte=low)
    found = {
        pk: chunks.between(pk, low, 2**63 - 1)
        for pk in set(again.values_list("series_id", flat=True))
    }
    blocks = rollups.concatenate([rollups.aggregate(pk, points) for pk, points in found.items()])
    rollups.store(blocks, dict.fromkeys(found, step))
