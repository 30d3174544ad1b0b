"""Reading telemetry back for charts: any time window, every device of a host in one query.

A window within the raw retention and at most RAW_WINDOW_S long is read from the raw
points (series steps are Unix seconds); a longer or older one from the rollups, at the
coarsest size (a minute, ten minutes, an hour) no wider than its buckets, so a chart reads
at most a few thousand rows a line whatever its span. Either way the database groups them
into at most ``points`` buckets per device and reading and returns each bucket's first
time, mean, minimum and maximum.
"""

from __future__ import annotations

import math
import time as clock
from typing import Any

from django.conf import settings
from django.db import connection

from npulab.core.sql import table_name
from npulab.series.models import Metric, MetricSeries
from npulab.telemetry.models import HOST_ITSELF, ROLLUP_SIZES, DeviceTelemetry, Rollup

# The charts the pages draw: the readings a person looks at first.
CHART_READINGS = ("temperature_c", "power_w", "utilization_pct", "memory_used_mb")
WINDOWS = {
    "1h": 3600,
    "6h": 6 * 3600,
    "24h": 24 * 3600,
    "7d": 7 * 86400,
    "30d": 30 * 86400,
    "90d": 90 * 86400,
}
DEFAULT_WINDOW = "6h"
# Six hours of raw samples every 5 s are 4,320 points a reading; a day would be 17,280.
RAW_WINDOW_S = 6 * 3600
DEFAULT_POINTS = 600

_RAW = """
    SELECT s.device_index, s.key, MIN(m.step), SUM(m.value), COUNT(m.value),
           MIN(m.value), MAX(m.value)
    FROM {metric} m JOIN {series} s ON s.id = m.series_id
    WHERE s.host_id = %s AND s.key IN ({keys})
        AND COALESCE(s.device_index, {host_itself}) IN ({devices})
        AND m.step >= %s AND m.step < %s
    GROUP BY s.device_index, s.key, (m.step - %s) / %s
    ORDER BY 1, 2, 3
"""
_ROLLUPS = """
    SELECT device, reading, MIN(start), SUM(total), SUM(points), MIN(minimum), MAX(maximum)
    FROM {rollup}
    WHERE host_id = %s AND reading IN ({keys}) AND device IN ({devices}) AND size = %s
        AND start >= %s AND start < %s
    GROUP BY device, reading, (start - %s) / %s
    ORDER BY 1, 2, 3
"""


def plan(start: float, end: float, points: int, raw_since: float) -> tuple[int | None, int]:
    """Where a window is read from and how wide its buckets are: (rollup size, or None for
    the raw points; bucket seconds, a multiple of the size)."""
    width = (end - start) / max(points, 1)
    if end - start <= RAW_WINDOW_S and start >= raw_since:
        return None, max(1, math.ceil(width))
    size = max([size for size in ROLLUP_SIZES if size <= width] or [ROLLUP_SIZES[0]])
    return size, max(size, math.ceil(width / size) * size)


def window(
    host_id: int,
    start: float,
    end: float,
    devices: list[int | None] | None = None,
    readings: tuple[str, ...] = CHART_READINGS,
    points: int = DEFAULT_POINTS,
    now: float | None = None,
) -> dict[str, Any]:
    """``{"source", "start", "end", "bucket_s", "series": {reading: {device: [[t, mean, min,
    max], ...]}}}`` for the host's devices (those that sent telemetry, or ``devices``; None
    in the list is the host itself) from ``start`` to ``end``."""
    now = clock.time() if now is None else now
    raw_since = now - settings.NPULAB["TELEMETRY_RAW_DAYS"] * 86400
    # Planned on the window as asked: whole seconds outward would make 6 h one second more.
    size, bucket = plan(start, end, points, raw_since)
    start, end = math.floor(start), math.ceil(end)
    base = start - start % bucket
    # Always a list: the rollups' index is (host, device, reading, size, start), and only
    # with the devices named does a window read its own blocks and not all the host's.
    device_list = device_indices(host_id) if devices is None else list(devices)
    result = {
        "source": "raw" if size is None else "rollups",
        "start": start,
        "end": end,
        "bucket_s": bucket,
        "series": {reading: {} for reading in readings},
    }
    if not device_list or not readings:
        return result
    sql = (_RAW if size is None else _ROLLUPS).format(
        metric=table_name(Metric),
        series=table_name(MetricSeries),
        rollup=table_name(Rollup),
        keys=", ".join(["%s"] * len(readings)),
        devices=", ".join(["%s"] * len(device_list)),
        host_itself=HOST_ITSELF,
    )
    params: list[Any] = [host_id, *readings]
    params += [HOST_ITSELF if device is None else device for device in device_list]
    params += ([] if size is None else [size]) + [start, end, base, bucket]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for device, reading, first, total, counted, low, high in cursor.fetchall():
            if device is None or device == HOST_ITSELF:
                device = None
            mean = total / counted if counted else None
            result["series"][reading].setdefault(device, []).append([first, mean, low, high])
    return result


def sparklines(host_id: int, now: float | None = None, span_s: int = 3600) -> dict[Any, Any]:
    """The last hour of the chart readings per device, a point a minute: {device: {reading:
    [values]}}, for the device table's sparklines."""
    now = clock.time() if now is None else now
    data = window(host_id, now - span_s, now, points=span_s // 60, now=now)
    lines: dict[Any, dict[str, list[float | None]]] = {}
    for reading, by_device in data["series"].items():
        for device, buckets in by_device.items():
            lines.setdefault(device, {})[reading] = [bucket[1] for bucket in buckets]
    return lines


def device_indices(host_id: int) -> list[int | None]:
    """The host's devices that have sent telemetry (not the host itself), by index."""
    rows = DeviceTelemetry.objects.filter(host_id=host_id, device_index__isnull=False)
    return sorted(rows.values_list("device_index", flat=True))


def latest(host_id: int) -> dict[int | None, DeviceTelemetry]:
    """The newest sample of each of the host's devices (None: the host itself)."""
    return {row.device_index: row for row in DeviceTelemetry.objects.filter(host_id=host_id)}
