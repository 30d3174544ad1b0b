"""A series owned by a host's device: the same ingest, rollups and reads as a run's."""

from __future__ import annotations

import random

import pytest
from django.db import IntegrityError, transaction

from npulab.hosts.models import Host
from npulab.runs.models import Run
from npulab.series.ingest import Point, drop_points_after, insert_points
from npulab.series.models import MetricChunk, MetricRollupSegment, MetricSeries
from npulab.series.owners import Owner
from npulab.series.reads import keys, series, summary
from tests.factories import HostFactory, RunFactory, UserFactory
from tests.series.blocks import expected_blocks, stored_blocks, stored_points

pytestmark = pytest.mark.django_db


@pytest.fixture
def host() -> Host:
    return HostFactory(name="npu-01")


def noisy(rng: random.Random, steps: range) -> list[Point]:
    """Telemetry as a host would send it: out of order, a step twice, a NaN now and then."""
    points: list[Point] = []
    for step in steps:
        value = None if step % 13 == 0 else rng.uniform(20, 90)
        points.append((step, value, 1_700_000_000.0 + step))
        if step % 17 == 0:
            points.append((step, rng.uniform(20, 90), 1_700_000_000.0 + step))
    rng.shuffle(points)
    return points


def test_a_devices_blocks_equal_the_points_through_batches(host) -> None:
    rng = random.Random(3)
    owner = Owner.of_host(host.pk, 0)
    sent: dict[str, list[Point]] = {"temperature_c": [], "power_w": []}
    points = noisy(rng, range(-25, 4200))
    for start in range(0, len(points), 600):
        batch = {"temperature_c": points[start : start + 600], "power_w": points[start::7][:90]}
        insert_points(owner, batch)
        for key, got in batch.items():
            sent[key] += got

    owned = MetricSeries.objects.filter(host=host, device_index=0)
    assert stored_blocks(owned) == expected_blocks(owned)
    assert sorted(owned.values_list("key", "points", "last_step")) == sorted(
        (key, len(got), max(step for step, _, _ in got)) for key, got in sent.items()
    )
    stored = stored_points(owned)
    assert len(stored) == len(sent["temperature_c"]) + len(sent["power_w"])
    assert {attempt for *_, attempt in stored} == {0}


def test_devices_and_the_host_itself_keep_separate_series_of_one_key(host) -> None:
    for index in (0, 1, None):
        owner = Owner.of_host(host.pk, index)
        value = -1.0 if index is None else float(index)
        insert_points(owner, {"util_pct": [(step, value, 1.0) for step in range(5)]})
        insert_points(owner, {"util_pct": [(step, value, 1.0) for step in range(5, 8)]})
    run = RunFactory()
    insert_points(Owner.of_run(run.pk), {"util_pct": [(0, 9.0, 1.0)]}, attempt=1)

    assert MetricSeries.objects.filter(key="util_pct").count() == 4
    for index, value in ((0, 0.0), (1, 1.0), (None, -1.0)):
        body = series(Owner.of_host(host.pk, index), "util_pct")
        assert (body["total"], body["downsampled"]) == (8, False)
        assert body["points"] == [(step, value) for step in range(8)]
    assert series(Owner.of_run(run.pk), "util_pct")["points"] == [(0, 9.0)]
    assert summary(Owner.of_host(host.pk, 1)) == [{"key": "util_pct", "points": 8, "last_step": 7}]
    assert keys(Owner.of_host(host.pk, 2)) == []


def test_a_long_device_series_charts_from_blocks_with_its_spike(host) -> None:
    owner = Owner.of_host(host.pk, 3)
    points: list[Point] = [(step, 40.0, float(step)) for step in range(60_000)]
    points[41_234] = (41_234, 105.0, 41_234.0)
    insert_points(owner, {"temperature_c": points})

    body = series(owner, "temperature_c", 1000)

    assert (body["total"], body["downsampled"]) == (60_000, True)
    assert 500 <= len(body["points"]) <= 1000
    assert [point[0] for point in body["points"]] == sorted(point[0] for point in body["points"])
    spikes = [point for point in body["points"] if point[3] == 105.0]
    assert len(spikes) == 1
    assert spikes[0][0] <= 41_234
    assert all(point[2] == 40.0 for point in body["points"])


def test_a_short_device_series_downsamples_from_its_points(host) -> None:
    owner = Owner.of_host(host.pk, 0)
    insert_points(owner, {"hbm_used_mb": [(step, float(step), 1.0) for step in range(300)]})

    body = series(owner, "hbm_used_mb", 100)

    # Buckets of 3 steps, narrower than any block: grouped from the points themselves.
    assert body["downsampled"] is True
    assert body["points"][:2] == [[0, 1.0, 0.0, 2.0], [3, 4.0, 3.0, 5.0]]
    assert len(body["points"]) == 100


def test_cutting_a_device_series_back_keeps_its_blocks_equal_to_its_points(host) -> None:
    owner = Owner.of_host(host.pk, 0)
    insert_points(owner, {"temperature_c": noisy(random.Random(5), range(2500))})
    other = Owner.of_host(host.pk, 1)
    insert_points(other, {"temperature_c": [(step, 1.0, 1.0) for step in range(2500)]})

    drop_points_after(owner, 1234)

    owned = MetricSeries.objects.filter(host=host, device_index=0)
    assert stored_blocks(owned) == expected_blocks(owned)
    assert list(owned.values_list("points", "last_step")) == [(len(stored_points(owned)), 1234)]
    assert summary(other) == [{"key": "temperature_c", "points": 2500, "last_step": 2499}]


def test_deleting_a_host_deletes_its_series_points_and_blocks(host) -> None:
    insert_points(Owner.of_host(host.pk, 0), {"power_w": [(s, 1.0, 1.0) for s in range(2500)]})
    insert_points(Owner.of_host(host.pk), {"load": [(s, 1.0, 1.0) for s in range(20)]})
    kept_host = HostFactory(name="npu-02")
    insert_points(Owner.of_host(kept_host.pk, 0), {"power_w": [(0, 2.0, 1.0)]})
    run = RunFactory(host=host)
    insert_points(Owner.of_run(run.pk), {"loss": [(0, 3.0, 1.0)]}, attempt=1)
    kept = set(MetricSeries.objects.exclude(host=host).values_list("pk", flat=True))

    Host.objects.get(pk=host.pk).delete()

    # The run outlives its host (its host becomes empty), and so do its metrics.
    assert Run.objects.get(pk=run.pk).host is None
    assert set(MetricSeries.objects.values_list("pk", flat=True)) == kept
    assert set(MetricChunk.objects.values_list("series", flat=True)) == kept
    assert set(MetricRollupSegment.objects.values_list("series", flat=True)) == kept


def test_deleting_a_run_leaves_the_devices_series(host) -> None:
    run = RunFactory(host=host)
    insert_points(Owner.of_run(run.pk), {"loss": [(0, 3.0, 1.0)]}, attempt=1)
    insert_points(Owner.of_host(host.pk, 0), {"power_w": [(0, 2.0, 1.0)]})

    run.delete()

    assert list(MetricChunk.objects.values_list("series__host", "series__key")) == [
        (host.pk, "power_w")
    ]


@pytest.mark.parametrize(
    "fields",
    [
        {"run": True, "host": True},
        {"run": True, "device_index": 0},
        {},
        {"device_index": 0},
    ],
    ids=["run-and-host", "run-with-a-device", "no-owner", "a-device-of-no-host"],
)
def test_the_database_refuses_a_series_without_exactly_one_owner(host, fields) -> None:
    values = {
        "run": RunFactory() if fields.get("run") else None,
        "host": host if fields.get("host") else None,
        "device_index": fields.get("device_index"),
    }
    with pytest.raises(IntegrityError), transaction.atomic():
        MetricSeries.objects.create(key="loss", **values)


@pytest.mark.parametrize("index", [0, None], ids=["a-device", "the-host"])
def test_the_database_refuses_a_second_series_of_one_key_and_owner(host, index) -> None:
    MetricSeries.objects.create(host=host, device_index=index, key="power_w")
    MetricSeries.objects.create(host=host, device_index=1 if index == 0 else 0, key="power_w")
    with pytest.raises(IntegrityError), transaction.atomic():
        MetricSeries.objects.create(host=host, device_index=index, key="power_w")


def test_a_run_has_one_series_per_key() -> None:
    run = RunFactory()
    MetricSeries.objects.create(run=run, key="loss")
    with pytest.raises(IntegrityError), transaction.atomic():
        MetricSeries.objects.create(run=run, key="loss")


@pytest.mark.parametrize(
    "fields",
    [{}, {"run_id": 1, "host_id": 1}, {"run_id": 1, "device_index": 0}],
    ids=["nobody", "both", "a-run-with-a-device"],
)
def test_an_owner_is_a_run_or_a_host(fields) -> None:
    with pytest.raises(ValueError, match=r"run|host"):
        Owner(**fields)


def test_nan_points_count_but_do_not_move_the_mean(host) -> None:
    owner = Owner.of_host(host.pk, 0)
    # The event parser stores a NaN as None.
    insert_points(owner, {"t": [(step, None, 1.0) for step in range(10)]})
    insert_points(owner, {"t": [(step, 2.0, 1.0) for step in range(10, 20)]})

    body = series(owner, "t", 1)

    assert body["points"] == [[0, 2.0, 2.0, 2.0]]


def test_the_admin_lists_series_of_runs_and_devices_read_only(client, host) -> None:
    run = RunFactory()
    insert_points(Owner.of_run(run.pk), {"loss": [(0, 3.0, 1.0)]}, attempt=1)
    insert_points(Owner.of_host(host.pk, 2), {"power_w": [(0, 2.0, 1.0)]})
    client.force_login(UserFactory(username="admin", is_staff=True, is_superuser=True))

    page = client.get("/admin/series/metricseries/")

    assert page.status_code == 200
    assert "loss" in page.text
    assert "power_w" in page.text
    found = MetricSeries.objects.get(key="power_w")
    assert client.get(f"/admin/series/metricseries/{found.pk}/delete/").status_code == 403
