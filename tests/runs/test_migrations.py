"""Metric points stored before series existed keep their values, steps and times, through the
move of the store to npulab.series and back."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from django.apps.registry import Apps
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = ("runs", "0003_attempts_and_checkpoints")
IN_RUNS = ("runs", "0005_exit_cause_from_the_contract")
AFTER = ("series", "0001_initial")
MODELS = ("metricseries", "metric", "metricrollup")
BEFORE_PROJECTS = ("runs", "0011_run_host_faults")


def migrate(*targets: tuple[str, str]) -> Apps:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(list(targets))
    return MigrationExecutor(connection).loader.project_state(list(targets)).apps


@pytest.fixture
def restored() -> Iterator[None]:
    """Leave every app fully migrated again: going back also unapplied other apps' children."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def metric_tables(prefix: str) -> set[str]:
    return {f"{prefix}_{model}" for model in MODELS} & set(connection.introspection.table_names())


@pytest.mark.django_db(transaction=True)
def test_points_move_under_series_with_their_rollups_into_the_series_app(restored) -> None:
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

    assert metric_tables("series") == {f"series_{model}" for model in MODELS}
    assert not metric_tables("runs")
    series = new.get_model("series", "MetricSeries").objects.filter(run_id=run.pk)
    assert sorted(series.values_list("key", "points", "last_step", "host", "device_index")) == [
        ("loss", 1503, 1499, None, None),
        ("lr", 2, 7, None, None),
    ]
    metric = new.get_model("series", "Metric").objects
    moved = sorted(metric.values_list("series__key", "step", "value", "time"), key=str)
    assert moved == sorted(
        ((k, s, v, pytest.approx(at.timestamp())) for k, s, v in points), key=str
    )
    rollups = new.get_model("series", "MetricRollup").objects
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


@pytest.mark.django_db(transaction=True)
def test_moving_the_store_back_to_runs_keeps_the_points_and_the_content_types(restored) -> None:
    # The real model: contenttypes is never migrated back here, and the state of
    # runs.0005 predates its 0002.
    # Of the models that were in runs (the chunks came later, in series) and still are
    # models: the row-a-block rollups left in series.0005, and a new database has no
    # content type for them.
    of_runs = ContentType.objects.filter(app_label="series", model__in=MODELS)
    ids = dict(of_runs.values_list("model", "pk"))
    assert set(ids) == set(MODELS) - {"metricrollup"}
    # Runs of before projects too: a run's project is not in this state's model.
    new = migrate(AFTER, BEFORE_PROJECTS)
    user = new.get_model("auth", "User").objects.create(username="migrator")
    run = new.get_model("runs", "Run").objects.create(
        kind="training", spec={}, device_type="cpu", submitted_by_id=user.pk
    )
    found = new.get_model("series", "MetricSeries").objects.create(
        run_id=run.pk, key="loss", points=1, last_step=3
    )
    new.get_model("series", "Metric").objects.create(
        series_id=found.pk, attempt=1, step=3, value=0.25, time=1.5
    )

    old = migrate(IN_RUNS)

    assert metric_tables("runs") == {f"runs_{model}" for model in MODELS}
    assert not metric_tables("series")
    points = old.get_model("runs", "Metric").objects
    assert list(points.values_list("series__run", "series__key", "step", "value", "time")) == [
        (run.pk, "loss", 3, 0.25, 1.5)
    ]
    back = ContentType.objects.filter(app_label="runs", model__in=MODELS)
    assert dict(back.values_list("model", "pk")) == ids

    again = migrate(AFTER)

    assert again.get_model("series", "Metric").objects.get().value == 0.25
    moved = ContentType.objects.filter(app_label="series", model__in=MODELS)
    assert dict(moved.values_list("model", "pk")) == ids


@pytest.mark.django_db(transaction=True)
def test_runs_queued_across_the_upgrade_keep_avoiding_the_hosts_they_avoided(restored) -> None:
    old = migrate(("runs", "0010_attempt_current_step"))
    user = old.get_model("auth", "User").objects.create(username="migrator")
    runs = old.get_model("runs", "Run").objects
    avoiding = runs.create(
        kind="training",
        spec={},
        device_type="cpu",
        submitted_by_id=user.pk,
        failed_hosts={"npu-01": 2},
    )
    fresh = runs.create(kind="training", spec={}, device_type="cpu", submitted_by_id=user.pk)

    new = migrate(("runs", "0011_run_host_faults"))

    faults = dict(new.get_model("runs", "Run").objects.values_list("pk", "host_faults"))
    assert faults == {avoiding.pk: {"npu-01": 2}, fresh.pk: {}}


BEFORE_PLACEMENTS = [("runs", "0013_run_project_no_default"), ("hosts", "0003_host_pool")]
PLACEMENTS = [("runs", "0014_placements")]


@pytest.mark.django_db(transaction=True)
def test_every_attempt_stored_before_placements_becomes_one_placement_on_its_host(
    restored,
) -> None:
    old = migrate(*BEFORE_PLACEMENTS)
    project = old.get_model("projects", "Project").objects.create(slug="gangs", name="Gangs")
    host = old.get_model("hosts", "Host").objects.create(name="npu-07", device_type="npu")
    run_model = old.get_model("runs", "Run")
    ended = run_model.objects.create(
        kind="training",
        spec={},
        device_type="npu",
        devices=2,
        project_id=project.pk,
        status="failed",
        attempt=2,
        host_id=host.pk,
    )
    at = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
    for number, status in ((1, "lost"), (2, "failed")):
        old.get_model("runs", "RunAttempt").objects.create(
            run_id=ended.pk,
            number=number,
            host_id=host.pk,
            device_indices=[4, 5],
            started_at=at,
            finished_at=at,
            status=status,
            exit_cause="worker_lost",
            exit_code=None if number == 1 else 3,
        )
    waiting = run_model.objects.create(
        kind="smoke",
        spec={},
        device_type="npu",
        project_id=project.pk,
        status="dispatched",
        host_id=host.pk,
        device_indices=[0],
        dispatched_at=at,
    )

    new = migrate(*PLACEMENTS)

    placements = new.get_model("runs", "Placement").objects.order_by("run_id", "attempt")
    assert list(
        placements.values_list(
            "run_id",
            "attempt",
            "node_rank",
            "host_name",
            "device_indices",
            "ranks",
            "state",
            "exit_code",
        )
    ) == [
        (ended.pk, 1, 0, "npu-07", [4, 5], 2, "lost", None),
        (ended.pk, 2, 0, "npu-07", [4, 5], 2, "failed", 3),
        (waiting.pk, 1, 0, "npu-07", [0], 1, "leased", None),
    ]
    assert new.get_model("runs", "Run").objects.get(pk=ended.pk).hosts == 1


@pytest.mark.django_db(transaction=True)
def test_log_lines_stored_before_are_numbered_in_their_attempts_and_first_errors_found(
    restored,
) -> None:
    old = migrate(("runs", "0016_merge"))
    project = old.get_model("projects", "Project").objects.create(slug="logs", name="Logs")
    runs = old.get_model("runs", "Run").objects
    run, other = (
        runs.create(kind="training", spec={}, device_type="cpu", project_id=project.pk)
        for _ in range(2)
    )
    at = datetime(2026, 12, 5, 6, 0, tzinfo=UTC)
    for number in (1, 2):
        old.get_model("runs", "RunAttempt").objects.create(
            run_id=run.pk, number=number, started_at=at
        )
    event = old.get_model("runs", "RunEvent")
    # Attempt 1's lines among a step and the other run's line; its error is its line 3.
    for attempt, run_id, kind, line in [
        (1, run.pk, "log", "starting"),
        (1, run.pk, "step", ""),
        (1, other.pk, "log", "the other run: Error: not this one"),
        (1, run.pk, "log", "step 1"),
        (1, run.pk, "log", "RuntimeError: EL0004 out of memory"),
        (2, run.pk, "log", "again, fine"),
        (1, run.pk, "log", "[ERROR] later"),
    ]:
        event.objects.create(
            run_id=run_id, attempt=attempt, type=kind, time=at, data={"line": line}
        )

    new = migrate(("runs", "0017_log_line_numbers"))

    rows = new.get_model("runs", "RunEvent").objects.order_by("id")
    assert list(rows.values_list("run_id", "attempt", "type", "line_no")) == [
        (run.pk, 1, "log", 1),
        (run.pk, 1, "step", None),
        (other.pk, 1, "log", 1),
        (run.pk, 1, "log", 2),
        (run.pk, 1, "log", 3),
        (run.pk, 2, "log", 1),
        (run.pk, 1, "log", 4),
    ]
    attempts = new.get_model("runs", "RunAttempt").objects.order_by("number")
    assert list(attempts.values_list("number", "first_error_line")) == [(1, 3), (2, None)]
