"""Metric points move under a per-run series, with block rollups for charts.

The points keep their values: each (run, key) becomes a MetricSeries, its
points are linked to it, their time becomes Unix seconds, and the rollups
are computed from them.
"""

import django.db.models.deletion
from django.db import migrations, models

ROLLUP_SIZES = (10, 1000)


def _epoch_seconds(vendor: str) -> str:
    if vendor == "postgresql":
        return "EXTRACT(EPOCH FROM time)"
    # Django stores SQLite datetimes as ISO text in UTC.
    return "ROUND((julianday(time) - 2440587.5) * 86400, 3)"


def link_points(apps, schema_editor) -> None:
    connection = schema_editor.connection
    table = schema_editor.quote_name
    metric, series = table("runs_metric"), table("runs_metricseries")
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {series} (run_id, key, points, last_step)"
            f" SELECT run_id, key, COUNT(*), MAX(step) FROM {metric} GROUP BY run_id, key"
        )
        cursor.execute(
            f"UPDATE {metric} SET time_seconds = {_epoch_seconds(connection.vendor)},"
            f" series_id = (SELECT s.id FROM {series} s"
            f" WHERE s.run_id = {metric}.run_id AND s.key = {metric}.key)"
        )


def build_rollups(apps, schema_editor) -> None:
    table = schema_editor.quote_name
    with schema_editor.connection.cursor() as cursor:
        for size in ROLLUP_SIZES:
            # Integer division truncates towards zero; blocks start at the floor.
            start = f"(CASE WHEN step >= 0 THEN step / {size} ELSE (step + 1) / {size} - 1 END) * {size}"
            cursor.execute(
                f"INSERT INTO {table('runs_metricrollup')}"
                " (series_id, size, start, points, counted, total, minimum, maximum, first_step)"
                f" SELECT series_id, {size}, {start}, COUNT(*), COUNT(value), SUM(value),"
                " MIN(value), MAX(value), MIN(step)"
                f" FROM {table('runs_metric')} GROUP BY series_id, {start}"
            )


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0003_attempts_and_checkpoints"),
    ]

    operations = [
        migrations.CreateModel(
            name="MetricSeries",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("key", models.CharField(max_length=200)),
                ("points", models.BigIntegerField(default=0)),
                ("last_step", models.BigIntegerField(blank=True, null=True)),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="metric_series",
                        to="runs.run",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("run", "key"), name="metricseries_run_key")
                ],
            },
        ),
        migrations.AddField(
            model_name="metric",
            name="series",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="runs.metricseries",
            ),
        ),
        migrations.AddField(
            model_name="metric",
            name="time_seconds",
            field=models.FloatField(null=True),
        ),
        # Backwards works on an empty table only: the old columns come back NOT
        # NULL, so existing points make it fail loudly rather than lose their keys.
        migrations.RunPython(link_points, migrations.RunPython.noop, elidable=False),
        migrations.RemoveIndex(model_name="metric", name="metric_run_key_step"),
        migrations.RemoveField(model_name="metric", name="run"),
        migrations.RemoveField(model_name="metric", name="key"),
        migrations.RemoveField(model_name="metric", name="time"),
        migrations.RenameField(model_name="metric", old_name="time_seconds", new_name="time"),
        migrations.AlterField(
            model_name="metric",
            name="time",
            field=models.FloatField(help_text="Unix seconds, as the runner logged it."),
        ),
        migrations.AlterField(
            model_name="metric",
            name="series",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="runs.metricseries",
            ),
        ),
        migrations.AddIndex(
            model_name="metric",
            index=models.Index(
                fields=["series", "step"], include=("value",), name="metric_series_step"
            ),
        ),
        migrations.CreateModel(
            name="MetricRollup",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("size", models.IntegerField()),
                ("start", models.BigIntegerField()),
                ("points", models.IntegerField(help_text="Points in the block, NaN included.")),
                ("counted", models.IntegerField(help_text="Points with a finite value.")),
                ("total", models.FloatField(null=True)),
                ("minimum", models.FloatField(null=True)),
                ("maximum", models.FloatField(null=True)),
                ("first_step", models.BigIntegerField()),
                (
                    "series",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="runs.metricseries",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("series", "size", "start"), name="metricrollup_series_size_start"
                    )
                ],
            },
        ),
        migrations.RunPython(build_rollups, migrations.RunPython.noop, elidable=False),
    ]
