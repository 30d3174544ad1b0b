"""Reading metric series back: whole or a page of it, or downsampled for a chart.

A chart has a few thousand pixels; a long training run logs millions of
points. Downsampling groups the steps into equal buckets and returns each
bucket's first step with the mean, minimum and maximum, so a spike survives
as the band's edge. A bucket as wide as a rollup block or wider is combined
from the blocks (npulab.series.rollups), so its cost follows the number of
buckets, not of points; narrower ones from the points. The blocks come out
of the database as their rows' arrays, the points as their chunks'
(npulab.series.chunks); both are combined with numpy, exact in min / max.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import Case, Min, QuerySet, Value, When

from npulab.core.sql import column_name, fetch_rows, table_name
from npulab.series import chunks, rollups
from npulab.series.columns import as_python
from npulab.series.models import MetricChunk, MetricSeries
from npulab.series.owners import Owner
from workers.contract.capture import SOURCES

DEFAULT_POINTS = 1000
MAX_POINTS = 20000
# The most points one page of a whole read may hold (``limit``).
MAX_PAGE = 100_000
# The columns of a whole read, and of a downsampled one.
WHOLE = ("step", "value", "time")
BUCKETS = ("step", "mean", "min", "max")


@dataclass(frozen=True)
class Found:
    """A stored series, as a read needs it."""

    pk: int
    points: int
    first_step: int | None
    last_step: int | None
    source: str = ""


@dataclass(frozen=True)
class Read:
    """A series as ``read`` gives it: its point count, whether it was downsampled, and its
    columns by name (``WHOLE[:2]``, or ``BUCKETS`` downsampled)."""

    total: int
    downsampled: bool
    columns: dict[str, np.ndarray]

    @property
    def values(self) -> np.ndarray:
        """Each point's value, or each bucket's mean (NaN for none)."""
        return self.columns[BUCKETS[1] if self.downsampled else WHOLE[1]]


@dataclass(frozen=True)
class Page:
    """Columns of points by name (``WHOLE`` or ``BUCKETS``), and the step to read on from
    for the next page (None: this was the last)."""

    columns: dict[str, np.ndarray]
    next_step: int | None = None


def find(owner: Owner, key: str) -> Found | None:
    """The owner's series ``key``, with its first step; None if it has none.

    An owner without a source finds the key of any: ``track`` first, then the other sources
    in ``SOURCES``' order (a script's own MLflow loss before one it printed).
    """
    # One plain statement: every read of a series starts here, and the queryset that said
    # the same cost a chart read most of its time (docs/benchmarks.md, "Reads in columns").
    condition, params = owner.condition("s")
    rows = fetch_rows(_find_sql(connection.vendor, condition), [*params, key, *SOURCES])
    return Found(*rows[0]) if rows else None


_FIND = """
    SELECT s.id, s.points, (
        SELECT c.first_step FROM {chunk} c WHERE c.series_id = s.id
        ORDER BY c.first_step LIMIT 1
    ), s.last_step, s.{source}
    FROM {series} s WHERE {owner} AND s.{key} = %s
    ORDER BY CASE s.{source} {ranks} ELSE {unranked} END LIMIT 1
"""


@cache
def _find_sql(vendor: str, owner: str) -> str:
    ranks = " ".join(f"WHEN %s THEN {rank}" for rank in range(len(SOURCES)))
    return _FIND.format(
        chunk=table_name(MetricChunk),
        series=table_name(MetricSeries),
        owner=owner,
        key=column_name(MetricSeries, "key"),
        source=column_name(MetricSeries, "source"),
        ranks=ranks,
        unranked=len(SOURCES),
    )


def first_step(series_id: int) -> int | None:
    """The series' lowest step; None while it has no points."""
    return _first_step(series_id).first()


def _first_step(series: Any) -> QuerySet[MetricChunk]:
    chunks_of = MetricChunk.objects.filter(series=series).order_by("first_step")
    return chunks_of.values_list("first_step", flat=True)[:1]


def read(owner: Owner, key: str, points: int | None = None) -> Read:
    """One metric as columns: every (step, value) point, or at most ``points`` (step, mean,
    min, max) buckets; no points if the owner has no series ``key``."""
    found = find(owner, key)
    if found is None:
        return Read(0, False, {name: np.empty(0) for name in WHOLE[:2]})
    return read_of(found, points)


def read_of(found: Found, points: int | None = None) -> Read:
    """A found series, whole or in at most ``points`` buckets (as ``read``)."""
    if is_downsampled(found, points):
        return Read(found.points, True, buckets(found, points or 0).columns)
    return Read(found.points, False, whole(found, with_time=False).columns)


def series(owner: Owner, key: str, points: int | None = None) -> dict[str, Any]:
    """``read`` in Python: ``points`` a list of (step, value) tuples, or of [step, mean, min,
    max] lists downsampled, NaN as None."""
    found = read(owner, key, points)
    return {
        "key": key,
        "total": found.total,
        "downsampled": found.downsampled,
        "points": rows(found),
    }


def rows(found: Read) -> list[Any]:
    """The read's points as Python rows (as ``series`` gives them), made column by column."""
    # Whole points have always been (step, value) tuples, buckets lists.
    shape = list if found.downsampled else tuple
    return list(map(shape, zip(*map(as_python, found.columns.values()), strict=True)))


def first_steps(series_ids: list[int]) -> dict[int, int]:
    """Each series' lowest step, in one read (a series without points is left out)."""
    rows = (
        MetricChunk.objects.filter(series_id__in=series_ids)
        .values("series_id")
        .annotate(first=Min("first_step"))
        .values_list("series_id", "first")
    )
    return dict(rows)


def is_downsampled(found: Found, points: int | None) -> bool:
    """Whether a read of at most ``points`` buckets (None: all) is downsampled."""
    return points is not None and found.points > points


def whole(
    found: Found, after_step: int | None = None, limit: int | None = None, with_time: bool = True
) -> Page:
    """The points after ``after_step`` (all without it), ``limit`` of them or a few more.

    A page ends after the points of its ``limit``-th point's step, so that a step's repeats
    never straddle two pages; short of ``limit`` points, the page is the rest of the series.
    """
    names = WHOLE if with_time else WHOLE[:2]
    if found.points == 0 or (after_step is not None and after_step >= chunks.LAST):
        return Page({name: np.empty(0) for name in names})
    low = chunks.FIRST if after_step is None else after_step + 1
    picked, bound = _page(found.pk, low, limit)
    points = chunks.merged(picked)
    kept = points.steps >= low
    if bound is not None:
        kept &= points.steps <= bound
    if not kept.all():
        points = points.where(kept)
    more = bound is not None and found.last_step is not None and bound < found.last_step
    columns = dict(zip(names, points, strict=False))
    return Page(columns, bound if more else None)


def _page(series_id: int, low: int, limit: int | None) -> tuple[list[chunks.Stored], int | None]:
    """The chunks of a page from step ``low``, and its last step when ``limit`` ends it.

    In order of first step: once ``limit`` points are in, a chunk starting after the page's
    last step cannot hold any of its points, and the rest are not read.
    """
    picked: list[chunks.Stored] = []
    count, bound = 0, None
    for chunk in chunks.spanning(series_id, low):
        if bound is not None and chunk.first_step > bound:
            break
        picked.append(chunk)
        if limit is None:
            continue
        # A chunk is sorted: its points from ``low`` are its last ones.
        count += len(chunk.points) - int(np.searchsorted(chunk.points.steps, low))
        if count >= limit:
            steps = np.concatenate([one.points.steps for one in picked])
            steps = steps[steps >= low]
            # Chunks that do not overlap are in step order already: no partition needed.
            if not np.all(steps[1:] >= steps[:-1]):
                steps = np.partition(steps, limit - 1)
            bound = int(steps[limit - 1])
    return picked, bound


def recent(series_id: int, attempt: int, count: int) -> chunks.Points:
    """About the last ``count`` points that ``attempt`` logged to the series, in step order:
    those of its newest chunks (a chunk overlapping them from earlier is not looked for)."""
    picked: list[chunks.Stored] = []
    found = 0
    for chunk in chunks.newest(series_id, attempt):
        picked.append(chunk)
        found += len(chunk.points)
        if found >= count:
            break
    return chunks.merged(picked).where(slice(-count, None))


def plan(low: int, high: int, points: int) -> tuple[int | None, int, int]:
    """How to read steps ``low``..``high`` as at most ``points`` buckets: (block size, base,
    bucket width), with size None where the buckets are narrower than the finest block and
    are computed from the points.

    The coarsest blocks that still give half the buckets asked for: a bucket then reads at
    most five blocks of its level (each level is ten times the next), and one where the
    width asked is a block's (1,001 buckets of a million steps are 1,000 of 1,000 steps).
    """
    wanted = min(points, high - low + 1)
    width = math.ceil((high - low + 1) / points)
    for size in rollups.SIZES:
        if size > 2 * width:
            continue
        base = low - low % size
        wide = math.ceil((high - base + 1) / points / size) * size
        if 2 * math.ceil((high - base + 1) / wide) >= wanted:
            return size, base, wide
    return None, low, width


def buckets(found: Found, points: int) -> Page:
    """At most ``points`` buckets: each one's first step, mean, minimum and maximum."""
    if found.first_step is None or found.last_step is None:
        return Page({name: np.empty(0) for name in BUCKETS})
    size, base, width = plan(found.first_step, found.last_step, points)
    if size is None:
        first, value = whole(found, with_time=False).columns.values()
        finite = ~np.isnan(value)
        counted, total = finite.astype(np.int64), np.where(finite, value, 0.0)
        low = high = value
    else:
        first, counted, total, low, high = rollups.read(found.pk, size)
    combined = _combine(first, counted, total, low, high, base, width)
    return Page(dict(zip(BUCKETS, combined, strict=True)))


def _combine(
    first: np.ndarray,
    counted: np.ndarray,
    total: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    base: int,
    width: int,
) -> list[np.ndarray]:
    """Blocks (or points) in step order into buckets of ``width`` steps from ``base``."""
    if len(first) == 0:
        return [first, total, low, high]
    # A block's first step is in the bucket of its start: the width is a multiple of the
    # block size and the base a block start.
    bucket = (first - base) // width
    starts = np.flatnonzero(np.concatenate(([True], bucket[1:] != bucket[:-1])))
    with np.errstate(invalid="ignore", divide="ignore"):
        # 0 / 0 is NaN: a bucket of NaN points has no mean.
        mean = np.add.reduceat(total, starts) / np.add.reduceat(counted, starts)
    # fmin / fmax skip NaN (a block without a finite value) unless all are. In step order,
    # a bucket's first step is its first block's.
    return [
        first[starts],
        mean,
        np.fmin.reduceat(low, starts),
        np.fmax.reduceat(high, starts),
    ]


_PREFERENCE = Case(
    *(When(source=name, then=Value(rank)) for rank, name in enumerate(SOURCES)),
    default=Value(len(SOURCES)),
)


def summary(owner: Owner) -> list[dict[str, Any]]:
    """Each metric's name, point count and last step, by name."""
    # A run's series name their source; a host's telemetry has none.
    fields = (
        ("key", "source", "points", "last_step") if owner.run_id else ("key", "points", "last_step")
    )
    return list(_of(owner).order_by("key", _PREFERENCE).values(*fields))


def keys(owner: Owner) -> list[str]:
    """The owner's metric names, sorted."""
    return list(_of(owner).order_by("key").values_list("key", flat=True).distinct())


def _of(owner: Owner) -> QuerySet[MetricSeries]:
    return MetricSeries.objects.filter(**owner.fields())
