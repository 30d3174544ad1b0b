"""Series stored before the 100- and 10,000-step rollups get them from their stored blocks; a
run's points move from a row each into chunks and back, and a host's telemetry stays rows."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from npulab.series.chunks import MAX_POINTS
from npulab.series.ingest import insert_samples
from npulab.series.models import Metric, MetricChunk, MetricRollupSegment
from npulab.series.owners import Owner
from npulab.series.reads import series
from tests.series.blocks import expected_blocks, stored_blocks, stored_points
from tests.series.test_rollups import metric, noisy_batches, of_run, send, started

TWO_LEVELS = ("series", "0001_initial")
ROWS = ("series", "0002_rollup_levels")
BLOCK_ROWS = ("series", "0004_series_source")


def migrate(target: tuple[str, str]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([target])


def apps_at(target: tuple[str, str]) -> Apps:
    return MigrationExecutor(connection).loader.project_state([target]).apps


def migrate_to_the_latest() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.fixture
def restored() -> Iterator[None]:
    yield
    migrate_to_the_latest()


@pytest.mark.django_db(transaction=True)
def test_the_new_levels_are_built_from_the_stored_blocks(owner, cpu_host, restored) -> None:
    run = started(owner, cpu_host)
    for batch in noisy_batches(random.Random(15), range(-40, 23_456), 5000):
        send(cpu_host, run, batch)
    send(cpu_host, run, [metric("loss", 40_000, 7.0)])  # a lone block far off
    migrate(TWO_LEVELS)
    rollup = apps_at(TWO_LEVELS).get_model("series", "MetricRollup").objects
    assert set(rollup.values_list("size", flat=True).distinct()) == {10, 1000}

    migrate(ROWS)
    rollup = apps_at(ROWS).get_model("series", "MetricRollup").objects
    assert set(rollup.values_list("size", flat=True).distinct()) == {10, 100, 1000, 10_000}

    migrate_to_the_latest()  # the points in chunks, the blocks in segments, to compare
    assert stored_blocks(of_run(run)) == expected_blocks(of_run(run))


@pytest.mark.django_db(transaction=True)
def test_a_runs_points_move_into_chunks_and_back_and_telemetry_stays(
    owner, cpu_host, restored
) -> None:
    run = started(owner, cpu_host)
    rng = random.Random(4)
    for batch in noisy_batches(rng, range(-40, 12_345), 4000):
        send(cpu_host, run, batch)
    samples = {Owner.of_host(cpu_host.pk, 0): {"temperature_c": [(1_700_000_000, 41.5, 1.0)]}}
    insert_samples(samples)
    before = {key: series(Owner.of_run(run.pk), key) for key in ("loss", "lr")}
    stored = stored_points(of_run(run))
    assert len({attempt for *_, attempt in stored}) == 1

    migrate(ROWS)
    rows = list(
        apps_at(ROWS)
        .get_model("series", "Metric")
        .objects.filter(series__run=run.pk)
        .order_by("series_id", "step", "id")
        .values_list("series__key", "series_id", "step", "value", "time", "attempt")
    )
    assert rows == stored
    assert not connection.introspection.table_names().count("series_metricchunk")

    # Forward to the latest: the reads below are today's code (series have a source since).
    migrate_to_the_latest()
    assert stored_points(of_run(run)) == stored
    assert {key: series(Owner.of_run(run.pk), key) for key in before} == before
    # Each series in as few chunks as MAX_POINTS allows.
    counts = {key: sum(1 for point in stored if point[0] == key) for key in before}
    assert counts["loss"] > MAX_POINTS > counts["lr"]
    assert sorted(MetricChunk.objects.values_list("series__key", "points")) == [
        ("loss", counts["loss"] - MAX_POINTS),
        ("loss", MAX_POINTS),
        ("lr", counts["lr"]),
    ]
    assert list(Metric.objects.values_list("step", "value")) == [(1_700_000_000, 41.5)]


@pytest.mark.django_db(transaction=True)
def test_the_blocks_move_into_segments_and_back_and_charts_read_the_same(
    owner, cpu_host, restored
) -> None:
    run = started(owner, cpu_host)
    rng = random.Random(31)
    # Two keys, NaN, repeats, late steps, a negative first step; then a far block of its own,
    # and over 2,000 blocks of 10 steps: more than one segment of the finest size.
    for batch in noisy_batches(rng, range(-40, 23_456), 5000):
        send(cpu_host, run, batch)
    send(cpu_host, run, [metric("loss", 10_000_123, 7.0)])
    blocks = stored_blocks(of_run(run))
    assert blocks == expected_blocks(of_run(run))
    charts = {
        (key, points): series(Owner.of_run(run.pk), key, points)
        for key in ("loss", "lr")
        for points in (3, 40, 700, 5000)
    }
    assert MetricRollupSegment.objects.filter(size=10).count() > 4

    migrate(BLOCK_ROWS)
    rows = apps_at(BLOCK_ROWS).get_model("series", "MetricRollup").objects
    found = rows.values_list(
        "series__key", "size", "start", "points", "counted", "total", "minimum", "maximum",
        "first_step",
    )  # fmt: skip
    assert {(key, size, start): tuple(rest) for key, size, start, *rest in found} == blocks
    assert "series_metricrollupsegment" not in connection.introspection.table_names()

    migrate_to_the_latest()
    assert stored_blocks(of_run(run)) == blocks
    assert {where: series(Owner.of_run(run.pk), *where) for where in charts} == charts
