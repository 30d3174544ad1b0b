"""Storing a host's telemetry: samples into series and latest rows, rollups, retention.

A sample's readings go to the metric store, one series per host, device and reading, with
the step in whole Unix seconds (``Owner.of_host(host, index)``). A host resends a batch it
had no answer for: a sample no newer than the device's latest stored one is taken as
already stored (accepted, not stored twice), so a resent batch changes nothing.
"""

from __future__ import annotations

import itertools
import math
import time as clock
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, F
from django.utils import timezone

from npulab.core.sql import table_name
from npulab.hosts.models import Host
from npulab.series.ingest import Point, insert_samples
from npulab.series.models import Metric, MetricSeries
from npulab.series.owners import Owner
from npulab.telemetry.models import HOST_ITSELF, ROLLUP_SIZES, DeviceTelemetry, Rollup
from npulab.telemetry.signals import samples_recorded
from workers.contract.telemetry import SampleInvalid, validate_sample

# A host's clock may run a little ahead of ours; a sample further ahead is refused, since
# it would hide every real sample after it as "already stored".
MAX_CLOCK_AHEAD_S = 300
DAY_S = 86400


@dataclass
class Recorded:
    """What became of a batch: the agent endpoint's reply."""

    accepted: int = 0
    stored: int = 0
    rejected: list[dict[str, Any]] = field(default_factory=list)

    def reply(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "stored": self.stored, "rejected": self.rejected}


def record_samples(host: Host, samples: list[Any], now: float | None = None) -> Recorded:
    """Validate and store a batch of contract samples; one bad sample never fails the rest."""
    now = clock.time() if now is None else now
    oldest = now - settings.NPULAB["TELEMETRY_RAW_DAYS"] * DAY_S
    result = Recorded()
    valid: list[dict[str, Any]] = []
    # A device the host did not register would be a series of its own for every index a
    # host's bug (or its token's thief) makes up.
    devices = {d.get("index") for d in host.devices if isinstance(d, dict)}
    for index, raw in enumerate(samples):
        try:
            sample = validate_sample(raw)
            if sample["index"] is not None and sample["index"] not in devices:
                raise SampleInvalid(
                    "index", f"host {host.name} registered no device {sample['index']}"
                )
            if sample["time"] > now + MAX_CLOCK_AHEAD_S:
                raise SampleInvalid("time", "is in the future: check the host's clock")
            if sample["time"] < oldest:
                raise SampleInvalid("time", "is older than the raw telemetry retention")
        except SampleInvalid as invalid:
            result.rejected.append(
                {"index": index, "field": invalid.field, "message": invalid.message}
            )
            continue
        valid.append(sample)
    result.accepted = len(valid)
    if not valid:
        return result
    with transaction.atomic():
        # One batch of a host at a time: the series store and the latest rows need it.
        _lock(host.pk)
        stored = _store(host, valid)
    result.stored = len(stored)
    if stored:
        samples_recorded.send(sender=DeviceTelemetry, host=host, samples=stored)
    return result


# PostgreSQL advisory locks of this app (class, object): a host's batches, the roll-up. Not
# the host's row: placement and heartbeats lock and update it, and waiting on them (or them
# on us) is how deadlocks start.
_LOCK_CLASS = 0x7E1E
_ROLL_UP_LOCK = 0  # host ids start at 1


def _lock(host_id: int) -> None:
    """Hold the host's telemetry lock until the transaction ends (SQLite: one writer anyway)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_LOCK_CLASS, host_id])


def _try_lock_roll_up() -> bool:
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", [_LOCK_CLASS, _ROLL_UP_LOCK])
        return bool(cursor.fetchone()[0])


def _store(host: Host, samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = DeviceTelemetry.objects.filter(host=host).only(
        "pk", "device_index", "time", "unrolled_from"
    )
    latest = {row.device_index: row for row in rows}
    last_time = {index: row.time for index, row in latest.items()}
    samples.sort(key=lambda sample: sample["time"])
    newest: dict[int | None, dict[str, Any]] = {}
    earliest: dict[int | None, float] = {}
    points: dict[Owner, dict[str, list[Point]]] = {}
    stored = []
    for sample in samples:
        index = sample["index"]
        last = last_time.get(index)
        if last is not None and sample["time"] <= last:
            continue  # stored before: a resent batch, or a repeat within this one
        last_time[index] = sample["time"]
        newest[index] = sample
        earliest.setdefault(index, sample["time"])
        stored.append(sample)
        step = int(sample["time"])
        by_key = points.setdefault(Owner.of_host(host.pk, index), {})
        for name, value in sample["readings"].items():
            by_key.setdefault(name, []).append((step, value, sample["time"]))
    insert_samples(points)
    received = timezone.now()
    changed, created = [], []
    for index, sample in newest.items():
        row = latest.get(index) or DeviceTelemetry(host=host, device_index=index)
        row.time = sample["time"]
        row.health = sample["health"]
        row.readings = sample["readings"]
        row.processes = sample["processes"]
        row.error = sample["error"]
        row.received = received
        first = earliest[index]
        row.unrolled_from = first if row.unrolled_from is None else min(row.unrolled_from, first)
        (changed if row.pk else created).append(row)
    _update_latest(changed)
    DeviceTelemetry.objects.bulk_create(created)
    return stored


_LATEST_FIELDS = ("time", "health", "readings", "processes", "error", "received", "unrolled_from")


def _update_latest(rows: list[DeviceTelemetry]) -> None:
    """One plain UPDATE per row, sent together: bulk_update's CASE per field and row costs
    more to build than the whole batch costs to store."""
    if not rows:
        return
    fields = [DeviceTelemetry._meta.get_field(name) for name in _LATEST_FIELDS]
    quote = connection.ops.quote_name
    sql = "UPDATE {} SET {} WHERE id = %s".format(  # noqa: S608 - names from the model
        table_name(DeviceTelemetry),
        ", ".join(f"{quote(field.column)} = %s" for field in fields),
    )
    params = [
        [field.get_db_prep_save(getattr(row, field.attname), connection) for field in fields]
        + [row.pk]
        for row in rows
    ]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


# Recomputes whole minutes from the raw points, so running it twice, or over a minute that
# got late samples, gives the same rows. Integer division floors the non-negative steps.
_ROLL_UP_RAW = """
    INSERT INTO {rollup} (host_id, device, reading, size, start, points, total, minimum, maximum)
    SELECT s.host_id, COALESCE(s.device_index, {host_itself}), s.key, 60, (m.step / 60) * 60,
           COUNT(m.value), SUM(m.value), MIN(m.value), MAX(m.value)
    FROM {metric} m
    JOIN {series} s ON s.id = m.series_id
    JOIN {latest} d ON d.host_id = s.host_id
        AND COALESCE(d.device_index, {host_itself}) = COALESCE(s.device_index, {host_itself})
    WHERE d.unrolled_from IS NOT NULL AND d.unrolled_from < %s
        AND m.step >= (CAST(d.unrolled_from AS BIGINT) / 60) * 60 AND m.step < %s
        AND m.value IS NOT NULL
    GROUP BY s.host_id, s.device_index, s.key, (m.step / 60) * 60
    ON CONFLICT (host_id, device, reading, size, start) DO UPDATE SET
        points = excluded.points, total = excluded.total,
        minimum = excluded.minimum, maximum = excluded.maximum
"""
# Each coarser block again from the finer ones it holds, the block still filling included
# (it is recomputed while its minutes come in).
_ROLL_UP_BLOCKS = """
    INSERT INTO {rollup} (host_id, device, reading, size, start, points, total, minimum, maximum)
    SELECT r.host_id, r.device, r.reading, %s, (r.start / %s) * %s,
           SUM(r.points), SUM(r.total), MIN(r.minimum), MAX(r.maximum)
    FROM {rollup} r
    JOIN {latest} d ON d.host_id = r.host_id
        AND COALESCE(d.device_index, {host_itself}) = r.device
    WHERE d.unrolled_from IS NOT NULL AND d.unrolled_from < %s
        AND r.size = %s AND r.start >= (CAST(d.unrolled_from AS BIGINT) / %s) * %s
        AND r.start < %s
    GROUP BY r.host_id, r.device, r.reading, (r.start / %s) * %s
    ON CONFLICT (host_id, device, reading, size, start) DO UPDATE SET
        points = excluded.points, total = excluded.total,
        minimum = excluded.minimum, maximum = excluded.maximum
"""


def _sql(template: str) -> str:
    return template.format(
        rollup=table_name(Rollup),
        metric=table_name(Metric),
        series=table_name(MetricSeries),
        latest=table_name(DeviceTelemetry),
        host_itself=HOST_ITSELF,
    )


def _roll_up(minute: int) -> int:
    """Every level's blocks of the marked devices, finest first; the rows written."""
    written = 0
    with connection.cursor() as cursor:
        cursor.execute(_sql(_ROLL_UP_RAW), [minute, minute])
        written += max(cursor.rowcount, 0)
        for finer, size in itertools.pairwise(ROLLUP_SIZES):
            params = [size, size, size, minute, finer, size, size, minute, size, size]
            cursor.execute(_sql(_ROLL_UP_BLOCKS), params)
            written += max(cursor.rowcount, 0)
    return written


def do_roll_up_telemetry(now: float | None = None) -> dict[str, int]:
    """Roll the complete minutes of raw points up (and those into ten minutes and hours),
    then delete what retention has passed.

    Each device is recomputed from its mark (``unrolled_from``: the oldest sample stored
    since the last run) up to the current minute, which is still filling and left for next
    time. The mark then moves to the minute before (not to the current one): a batch that
    lands while this runs, with samples of that minute, is rolled up again next time. A
    device whose samples arrive late (a host that was cut off resends its backlog) is marked
    again by ``record_samples``, so its minutes are recomputed whatever their age within the
    raw retention.

    Locks: the roll-up holds its own advisory lock (a second one at the same time skips)
    and only rollup rows; each mark moves in a statement of its own, so it never holds a
    row a batch waits for while waiting for one the batch holds.
    """
    now = clock.time() if now is None else now
    minute = int(now) // 60 * 60
    keep_from = minute - 60
    marked = list(
        DeviceTelemetry.objects.filter(unrolled_from__lt=minute).values_list(
            "pk", "unrolled_from", "time"
        )
    )
    rolled = 0
    if marked:
        with transaction.atomic():
            if not _try_lock_roll_up():
                return {"rollups": 0, "skipped": 1}
            rolled = _roll_up(minute)
        for pk, mark, newest in marked:
            # A batch stored meanwhile changed the row: leave its mark (recomputed again).
            DeviceTelemetry.objects.filter(pk=pk, unrolled_from=mark, time=newest).update(
                unrolled_from=None if newest < keep_from else min(mark, keep_from)
            )
    return {"rollups": rolled, **apply_retention(now)}


def apply_retention(now: float | None = None) -> dict[str, int]:
    """Delete raw telemetry points older than the raw retention, rollups older than theirs;
    each host series' count follows its points."""
    now = clock.time() if now is None else now
    raw_cutoff = math.floor(now - settings.NPULAB["TELEMETRY_RAW_DAYS"] * DAY_S)
    rollup_cutoff = math.floor(now - settings.NPULAB["TELEMETRY_ROLLUP_DAYS"] * DAY_S)
    old = Metric.objects.filter(series__host__isnull=False, step__lt=raw_cutoff)
    # Counted before the delete, so each series' count drops by what it lost.
    lost = dict(old.order_by().values_list("series").annotate(n=Count("*")))
    points = 0
    if lost:
        points, _ = Metric.objects.filter(series__in=list(lost), step__lt=raw_cutoff).delete()
        with transaction.atomic():
            # In id order, as a batch updates them (series.ingest.insert_samples): no deadlock.
            locked = MetricSeries.objects.select_for_update().filter(pk__in=list(lost))
            list(locked.order_by("pk").values_list("pk", flat=True))
            # Series sampled alike lose alike: one UPDATE per distinct count, not per series.
            by_count: dict[int, list[int]] = {}
            for series_id, count in lost.items():
                by_count.setdefault(count, []).append(series_id)
            for count, ids in by_count.items():
                MetricSeries.objects.filter(pk__in=ids).update(points=F("points") - count)
    blocks, _ = Rollup.objects.filter(start__lt=rollup_cutoff).delete()
    return {"raw_deleted": points, "rollups_deleted": blocks}
