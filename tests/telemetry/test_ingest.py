"""Storing samples: accepted and rejected, resent batches, the latest row, rollups, retention."""

from __future__ import annotations

import pytest

from npulab.series.models import Metric, MetricSeries
from npulab.series.owners import Owner
from npulab.telemetry.models import HOST_ITSELF, DeviceTelemetry, Rollup
from npulab.telemetry.reads import DEFAULT_POINTS, WINDOWS, plan, window
from npulab.telemetry.services import apply_retention, do_roll_up_telemetry, record_samples
from npulab.telemetry.signals import samples_recorded
from tests.paths import ASCEND_FIXTURES
from tests.telemetry.conftest import NOW, WARNING_8, capture_samples
from workers.contract.telemetry import sample

pytestmark = pytest.mark.django_db
DAY = 86400
DCMI_ERROR = next(
    line.strip()
    for line in (ASCEND_FIXTURES / "npu-smi-other/npu-smi-ERRORS_dcmi-8005_-8020_in-container.txt")
    .read_text(encoding="utf-8")
    .splitlines()
    if line.startswith("dcmi module initialize failed")
)


def points_of(host, index, key):
    found = MetricSeries.objects.get(**Owner.of_host(host.pk, index).fields(), key=key)
    return list(Metric.objects.filter(series=found).order_by("step").values_list("step", "value"))


def test_a_batch_of_real_samples_is_stored_as_series_and_latest_rows(npu_host, samples_at) -> None:
    batch = samples_at(NOW - 10) + samples_at(NOW - 5)
    result = record_samples(npu_host, batch, now=NOW)
    assert result.reply() == {"accepted": 16, "stored": 16, "rejected": []}
    # Chip 0 of the capture: 34 °C, 97.9 W, 3,408 of 65,536 MB HBM.
    assert points_of(npu_host, 0, "temperature_c") == [(NOW - 10, 34.0), (NOW - 5, 34.0)]
    assert points_of(npu_host, 0, "power_w")[-1] == (NOW - 5, 97.9)
    latest = DeviceTelemetry.objects.get(host=npu_host, device_index=0)
    assert latest.time == NOW - 5
    assert latest.readings["memory_total_mb"] == 65536.0
    assert latest.health == "OK"
    assert DeviceTelemetry.objects.filter(host=npu_host).count() == 8


def test_bad_samples_are_rejected_by_index_and_field_and_the_rest_stored(
    npu_host, samples_at
) -> None:
    good = samples_at(NOW)
    bad_reading = dict(good[1], readings={"power_w": "hot"})
    unknown = dict(good[2], readings={"fan_rpm": 1200.0})
    future = dict(good[3], time=NOW + 3600)
    too_old = dict(good[4], time=NOW - 8 * DAY)
    batch = [good[0], bad_reading, unknown, future, too_old, "not a sample", good[5]]
    result = record_samples(npu_host, batch, now=NOW)
    assert result.accepted == 2
    assert [(r["index"], r["field"]) for r in result.rejected] == [
        (1, "readings.power_w"),
        (2, "readings.fan_rpm"),
        (3, "time"),
        (4, "time"),
        (5, "sample"),
    ]
    assert "future" in result.rejected[2]["message"]
    assert sorted(DeviceTelemetry.objects.values_list("device_index", flat=True)) == [0, 5]


def test_a_resent_batch_changes_nothing(npu_host, samples_at) -> None:
    batch = samples_at(NOW - 10) + samples_at(NOW - 5)
    record_samples(npu_host, batch, now=NOW)
    before = Metric.objects.count()
    again = record_samples(npu_host, batch, now=NOW + 1)
    assert again.reply() == {"accepted": 16, "stored": 0, "rejected": []}
    assert Metric.objects.count() == before
    assert MetricSeries.objects.get(host=npu_host, device_index=0, key="power_w").points == 2


def test_the_latest_row_follows_the_newest_sample_whatever_the_order(npu_host) -> None:
    warning = capture_samples(WARNING_8)
    # Chip 3 of the 9010 capture reports health WARNING.
    newer, older = warning(NOW - 5)[3], capture_samples()(NOW - 10)[3]
    record_samples(npu_host, [newer, older], now=NOW)
    latest = DeviceTelemetry.objects.get(host=npu_host, device_index=3)
    assert (latest.time, latest.health) == (NOW - 5, "WARNING")
    error = sample(NOW - 1, 3, "UNKNOWN", error=DCMI_ERROR)
    record_samples(npu_host, [error], now=NOW)
    latest.refresh_from_db()
    assert (latest.health, latest.error, latest.readings) == ("UNKNOWN", DCMI_ERROR, {})


def test_the_signal_carries_only_what_was_stored(npu_host, samples_at) -> None:
    heard = []

    def listen(sender, host, samples, **kwargs):
        heard.append((host.pk, [(s["index"], s["time"]) for s in samples]))

    samples_recorded.connect(listen)
    try:
        record_samples(npu_host, samples_at(NOW)[:2], now=NOW)
        record_samples(npu_host, samples_at(NOW)[:2], now=NOW)  # a resend: nothing new
    finally:
        samples_recorded.disconnect(listen)
    assert heard == [(npu_host.pk, [(0, NOW), (1, NOW)])]


def minutes(**filters):
    return Rollup.objects.filter(size=60, **filters)


def test_the_host_itself_is_a_series_of_its_own(npu_host) -> None:
    record_samples(npu_host, [sample(NOW, None, readings={"load_1m": 3.5})], now=NOW)
    assert points_of(npu_host, None, "load_1m") == [(NOW, 3.5)]
    do_roll_up_telemetry(now=NOW + 120)
    assert minutes(host=npu_host, reading="load_1m").get().device == HOST_ITSELF
    assert window(npu_host.pk, NOW - 60, NOW + 60, devices=[None], readings=("load_1m",))["series"][
        "load_1m"
    ] == {None: [[int(NOW), 3.5, 3.5, 3.5]]}


def test_minutes_roll_up_exactly_and_late_samples_are_rolled_up_again(npu_host) -> None:
    minute = int(NOW) // 60 * 60
    values = [40.0, 50.0, 60.0]
    batch = [
        sample(minute + 5 + 20 * i, 0, "OK", {"temperature_c": v}) for i, v in enumerate(values)
    ]
    record_samples(npu_host, batch, now=minute + 70)
    # The current minute is still filling: not rolled up yet.
    do_roll_up_telemetry(now=minute + 50)
    assert not Rollup.objects.exists()
    do_roll_up_telemetry(now=minute + 70)
    row = minutes(host=npu_host, device=0, reading="temperature_c").get()
    assert (row.start, row.points, row.total, row.minimum, row.maximum) == (
        minute,
        3,
        150.0,
        40.0,
        60.0,
    )
    # Running it again (it recomputes the minute before the current one) changes nothing.
    do_roll_up_telemetry(now=minute + 130)
    assert Rollup.objects.get(pk=row.pk).points == 3
    # A sample of the next minute, then a late one for the first minute (another device's
    # backlog, say: a different index, so it is newer than that device's latest).
    record_samples(
        npu_host, [sample(minute + 61, 0, "OK", {"temperature_c": 70.0})], now=minute + 130
    )
    record_samples(
        npu_host, [sample(minute + 1, 1, "OK", {"temperature_c": 30.0})], now=minute + 130
    )
    do_roll_up_telemetry(now=minute + 130)
    assert list(minutes(device=0).order_by("start").values_list("start", "total")) == [
        (minute, 150.0),
        (minute + 60, 70.0),
    ]
    assert minutes(device=1).get().start == minute


def test_ten_minutes_and_hours_are_the_sum_of_the_minutes_they_hold(npu_host) -> None:
    hour = int(NOW) // 3600 * 3600
    # Two hours and a bit at one sample a minute: 0, 1, ... 129.
    batch = [sample(hour + 60 * i + 7, 2, "OK", {"power_w": float(i)}) for i in range(130)]
    record_samples(npu_host, batch, now=hour + 60 * 130 + 30)
    do_roll_up_telemetry(now=hour + 60 * 130 + 30)

    def blocks(size):
        rows = Rollup.objects.filter(size=size, device=2).order_by("start")
        return [(r.start - hour, r.points, r.total, r.minimum, r.maximum) for r in rows]

    assert len(blocks(60)) == 130
    assert blocks(600)[0] == (0, 10, float(sum(range(10))), 0.0, 9.0)
    assert blocks(600)[-1] == (7200, 10, float(sum(range(120, 130))), 120.0, 129.0)
    assert blocks(3600) == [
        (0, 60, float(sum(range(60))), 0.0, 59.0),
        (3600, 60, float(sum(range(60, 120))), 60.0, 119.0),
        (7200, 10, float(sum(range(120, 130))), 120.0, 129.0),  # still filling
    ]
    # The hour still filling grows as its minutes come in.
    more = [sample(hour + 60 * i + 7, 2, "OK", {"power_w": float(i)}) for i in range(130, 135)]
    record_samples(npu_host, more, now=hour + 60 * 135 + 30)
    do_roll_up_telemetry(now=hour + 60 * 135 + 30)
    assert blocks(3600)[-1] == (7200, 15, float(sum(range(120, 135))), 120.0, 134.0)


def test_retention_drops_raw_points_after_their_days_and_rollups_after_theirs(
    npu_host, settings
) -> None:
    settings.NPULAB = {**settings.NPULAB, "TELEMETRY_RAW_DAYS": 7, "TELEMETRY_ROLLUP_DAYS": 90}
    start = (int(NOW) - 6 * DAY) // 3600 * 3600
    record_samples(
        npu_host,
        [sample(start + 60 * i, 0, "OK", {"power_w": 100.0 + i}) for i in range(3)],
        now=NOW,
    )
    do_roll_up_telemetry(now=NOW)
    assert minutes().count() == 3
    assert Rollup.objects.count() == 5  # three minutes, their ten minutes, their hour
    # A week and a bit later the first two samples are past the raw week, their minutes not.
    later = start + 7 * DAY + 90
    result = apply_retention(now=later)
    assert result["raw_deleted"] == 2
    assert points_of(npu_host, 0, "power_w") == [(start + 120, 102.0)]
    assert MetricSeries.objects.get(host=npu_host, key="power_w").points == 1
    assert Rollup.objects.count() == 5
    # Past 90 days the rollups go too.
    assert apply_retention(now=start + 91 * DAY)["rollups_deleted"] == 5
    assert not Rollup.objects.exists()


def test_each_window_reads_the_coarsest_source_that_fits_it(npu_host) -> None:
    minute = int(NOW) // 60 * 60
    batch = [sample(minute - 3600 + 5 * i, 0, "OK", {"power_w": float(i % 12)}) for i in range(720)]
    record_samples(npu_host, batch, now=minute)
    do_roll_up_telemetry(now=minute)
    short = window(npu_host.pk, minute - 3600, minute, now=minute)
    assert short["source"] == "raw"
    buckets = short["series"]["power_w"][0]
    assert len(buckets) == 600  # 720 points into 6-second buckets
    assert max(b[3] for b in buckets) == 11.0
    plans = {
        name: plan(minute - seconds, minute, DEFAULT_POINTS, minute - 7 * DAY)
        for name, seconds in WINDOWS.items()
    }
    assert plans == {
        "1h": (None, 6),
        "6h": (None, 36),
        "24h": (60, 180),
        "7d": (600, 1200),
        "30d": (3600, 7200),
        "90d": (3600, 14400),
    }
    for name in ("24h", "7d", "30d"):
        long = window(npu_host.pk, minute - WINDOWS[name], minute, now=minute)
        assert long["source"] == "rollups"
        buckets = long["series"]["power_w"][0]
        assert all(b[0] % plans[name][0] == 0 for b in buckets)
        assert (min(b[2] for b in buckets), max(b[3] for b in buckets)) == (0.0, 11.0)
        # Every minute holds the values 0..11 once: so does every bucket, whatever its width.
        assert {b[1] for b in buckets} == {5.5}


def test_a_device_the_host_never_registered_is_rejected(npu_host) -> None:
    made_up = [sample(NOW, 4096, readings={"temperature_c": 40.0}), sample(NOW, 0)]
    result = record_samples(npu_host, made_up, now=NOW)
    assert result.rejected == [
        {"index": 0, "field": "index", "message": "host npu-01 registered no device 4096"}
    ]
    assert result.stored == 1
    assert not MetricSeries.objects.filter(host=npu_host, device_index=4096).exists()
