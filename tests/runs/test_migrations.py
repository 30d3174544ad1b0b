"""Metric points stored before series existed keep their values, steps and times."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = ("runs", "0003_attempts_and_checkpoints")
AFTER = ("runs", "0004_metric_series_and_rollups")


def migrate(target: tuple[str, str]):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([target])
    return MigrationExecutor(connection).loader.project_state([target]).apps


@pytest.mark.django_db(transaction=True)
def test_points_move_under_series_with_their_rollups() -> None:
    old = migrate(BEFORE)
    user = old.get_model("auth", "User").objects.create(username="migrator")
    run_model = old.get_model("runs", "Run")
    run = run_model.objects.create(
        kind="training", spec={}, device_type="cpu", submitted_by_id=user.pk
    )
    at = datetime(2026, 11, 30, 12, 0, 0, 250000, tzinfo=UTC)
    points = [("loss", step, float(step) / 2) for step in range(-3, 1500)]
    points += [("lr", 7, None), ("lr", 7, 0.5)]
    old.get_model("runs", "Metric").objects.bulk_create(
        old.get_model("runs", "Metric")(run=run, attempt=1, key=k, step=s, value=v, time=at)
        for k, s, v in points
    )

    new = migrate(AFTER)

    series = new.get_model("runs", "MetricSeries").objects.filter(run_id=run.pk)
    assert sorted(series.values_list("key", "points", "last_step")) == [
        ("loss", 1503, 1499),
        ("lr", 2, 7),
    ]
    metric = new.get_model("runs", "Metric").objects
    moved = sorted(metric.values_list("series__key", "step", "value", "time"), key=str)
    assert moved == sorted(
        ((k, s, v, pytest.approx(at.timestamp())) for k, s, v in points), key=str
    )
    rollups = new.get_model("runs", "MetricRollup").objects
    lr = rollups.get(series__key="lr", size=10)
    assert (lr.start, lr.points, lr.counted, lr.total, lr.first_step) == (0, 2, 1, 0.5, 7)
    # Negative steps fall in the block below zero, as Python's floor division puts them.
    below = rollups.get(series__key="loss", size=1000, start=-1000)
    assert (below.points, below.first_step, below.minimum, below.maximum) == (3, -3, -1.5, -0.5)
    top = rollups.get(series__key="loss", size=1000, start=1000)
    assert (top.points, top.total, top.maximum) == (
        500,
        sum(s / 2 for s in range(1000, 1500)),
        749.5,
    )
