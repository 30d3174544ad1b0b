"""interval events land in the stability table and in run series, one bad line never the batch."""

from __future__ import annotations

import pytest

from npulab.runs.models import RunEvent
from npulab.series import reads
from npulab.series.owners import Owner
from npulab.stability.models import StabilityInterval
from tests.stability.builders import ingest, interval, stability_run

pytestmark = pytest.mark.django_db


def test_intervals_become_rows_and_throughput_and_telemetry_series() -> None:
    run = stability_run(status="running", spec={"devices": 1})
    ingest(run, [interval(1), interval(2, throughput=1.5), interval(3, consistency="close")])
    rows = list(StabilityInterval.objects.filter(run=run))
    assert [(r.interval, r.device, r.consistency) for r in rows] == [
        (1, 0, "match"),
        (2, 0, "match"),
        (3, 0, "close"),
    ]
    assert rows[1].throughput == 1.5
    assert rows[0].telemetry == {
        "temperature_c": 61.0,
        "power_w": 300.0,
    }
    assert not RunEvent.objects.filter(run=run, type="interval").exists()
    owner = Owner.of_run(run.pk)
    assert set(reads.keys(owner)) == {"throughput/0", "temperature_c/0", "power_w/0"}
    points = reads.series(owner, "throughput/0")["points"]
    assert [(step, value) for step, value in points] == [(1, 2.0), (2, 1.5), (3, 2.0)]


def test_a_batch_delivered_twice_keeps_one_row_per_device_and_interval() -> None:
    run = stability_run(status="running")
    batch = [interval(1), interval(1, device=1)]
    ingest(run, batch)
    ingest(run, batch)
    assert StabilityInterval.objects.filter(run=run).count() == 2


def test_a_malformed_interval_becomes_a_visible_log_line_and_the_rest_is_kept() -> None:
    run = stability_run(status="running")
    ingest(
        run,
        [
            interval(1, consistency="fine-ish"),
            interval(2, device=-1),
            {"type": "interval", "interval": 3, "device": 0},  # no consistency
            interval(4),
        ],
    )
    assert list(StabilityInterval.objects.filter(run=run).values_list("interval", flat=True)) == [4]
    lines = [e.data["line"] for e in RunEvent.objects.filter(run=run, type="log")]
    assert len(lines) == 3
    assert "consistency must be one of match, close, mismatch, error" in lines[0]
    assert "device must be 0 to" in lines[1]
    assert "needs 'consistency'" in lines[2]


def test_hostile_telemetry_keeps_only_the_contracts_numeric_readings() -> None:
    run = stability_run(status="running")
    telemetry = {"temperature_c": 70, "owned": 1.0, "power_w": "lots", "clock_mhz": True}
    ingest(run, [interval(1, telemetry=telemetry, error="boom\x00", unit="x" * 99)])
    row = StabilityInterval.objects.get(run=run)
    assert row.telemetry == {"temperature_c": 70.0}
    assert row.error == "boom\ufffd"
    assert len(row.unit) == 20


def test_interval_events_of_another_kind_of_run_are_refused() -> None:
    from tests.factories import RunFactory

    run = RunFactory(status="running")
    ingest(run, [interval(1)])
    assert not StabilityInterval.objects.exists()
    assert "belong to stability runs" in RunEvent.objects.get(run=run).data["line"]
