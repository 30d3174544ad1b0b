"""The metric store, taken over from the runs app with its data, and opened to host owners.

The three models enter this app's state on the tables runs.0004 made (nothing is copied:
a table of millions of points is renamed, not rebuilt), the tables get this app's names,
and a series may then belong to a host's device instead of a run.
"""

import django.db.models.deletion
from django.db import migrations, models

MODELS = ("metricseries", "metric", "metricrollup")


def _move_content_types(apps, schema_editor, source: str, target: str) -> None:
    # Permissions and admin history hang on the content type: move it rather than let
    # post_migrate make a new one beside a stale one.
    content_type = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    taken = set(
        content_type.objects.using(db)
        .filter(app_label=target, model__in=MODELS)
        .values_list("model", flat=True)
    )
    content_type.objects.using(db).filter(app_label=source, model__in=MODELS).exclude(
        model__in=taken
    ).update(app_label=target)


def content_types_to_series(apps, schema_editor) -> None:
    _move_content_types(apps, schema_editor, "runs", "series")


def content_types_to_runs(apps, schema_editor) -> None:
    _move_content_types(apps, schema_editor, "series", "runs")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("hosts", "0002_host_snapshot_requested"),
        ("runs", "0006_move_metric_series_to_series"),
    ]

    operations = [
        # The models as runs.0004 left them, on its tables.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="MetricSeries",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
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
                        "db_table": "runs_metricseries",
                        "verbose_name_plural": "metric series",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("run", "key"), name="metricseries_run_key"
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="Metric",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "attempt",
                            models.PositiveIntegerField(
                                help_text="The run attempt that logged the point; 0 for a host's"
                                " series."
                            ),
                        ),
                        ("step", models.BigIntegerField()),
                        (
                            "value",
                            models.FloatField(
                                help_text="Null for a NaN or infinite value.", null=True
                            ),
                        ),
                        (
                            "time",
                            models.FloatField(help_text="Unix seconds, as the runner logged it."),
                        ),
                        (
                            "series",
                            models.ForeignKey(
                                db_constraint=False,
                                db_index=False,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="series.metricseries",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "runs_metric",
                        "indexes": [
                            models.Index(
                                fields=["series", "step"],
                                include=("value",),
                                name="metric_series_step",
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="MetricRollup",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("size", models.IntegerField()),
                        ("start", models.BigIntegerField()),
                        (
                            "points",
                            models.IntegerField(help_text="Points in the block, NaN included."),
                        ),
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
                                to="series.metricseries",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "runs_metricrollup",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("series", "size", "start"),
                                name="metricrollup_series_size_start",
                            )
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(content_types_to_series, content_types_to_runs, elidable=True),
        # Renamed in place; indexes and constraints keep their names.
        migrations.AlterModelTable(name="metricseries", table=None),
        migrations.AlterModelTable(name="metric", table=None),
        migrations.AlterModelTable(name="metricrollup", table=None),
        # A series is owned by a run or by a host's device.
        migrations.RemoveConstraint(model_name="metricseries", name="metricseries_run_key"),
        migrations.AlterField(
            model_name="metricseries",
            name="run",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="metric_series",
                to="runs.run",
            ),
        ),
        migrations.AddField(
            model_name="metricseries",
            name="host",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="metric_series",
                to="hosts.host",
            ),
        ),
        migrations.AddField(
            model_name="metricseries",
            name="device_index",
            field=models.PositiveIntegerField(
                blank=True, help_text="The host's device; empty for the host as a whole.", null=True
            ),
        ),
        migrations.AddConstraint(
            model_name="metricseries",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(
                        ("device_index__isnull", True),
                        ("host__isnull", True),
                        ("run__isnull", False),
                    ),
                    models.Q(("host__isnull", False), ("run__isnull", True)),
                    _connector="OR",
                ),
                name="series_one_owner",
            ),
        ),
        migrations.AddConstraint(
            model_name="metricseries",
            constraint=models.UniqueConstraint(
                condition=models.Q(("run__isnull", False)),
                fields=("run", "key"),
                name="series_run_key",
            ),
        ),
        migrations.AddConstraint(
            model_name="metricseries",
            constraint=models.UniqueConstraint(
                condition=models.Q(("device_index__isnull", False), ("host__isnull", False)),
                fields=("host", "device_index", "key"),
                name="series_host_device_key",
            ),
        ),
        migrations.AddConstraint(
            model_name="metricseries",
            constraint=models.UniqueConstraint(
                condition=models.Q(("device_index__isnull", True), ("host__isnull", False)),
                fields=("host", "key"),
                name="series_host_key",
            ),
        ),
    ]
