"""A run's points move from a row each (``Metric``) into chunks (``MetricChunk``).

``Metric`` keeps the hosts' telemetry, which has no attempt. On PostgreSQL a chunk's data
is compressed with lz4 where the server has it (PostgreSQL 14 and later, built with lz4),
else stored uncompressed: pglz, the default, cost more than the rest of the insert.

The chunks are packed here as ``npulab.series.chunks`` packs them, so that this migration
does not change when that module does.
"""

import django.db.models.deletion
import numpy as np
from django.db import DatabaseError, migrations, models, transaction

# npulab.series.chunks.MAX_POINTS when this was written.
MAX_POINTS = 10_000


def _pack(rows):
    steps, values, times = zip(*rows, strict=True)
    return b"".join(
        (
            np.array(steps, "<i8").tobytes(),
            np.array(values, "<f8").tobytes(),  # None becomes NaN
            np.array(times, "<f8").tobytes(),
        )
    )


def rows_to_chunks(apps, schema_editor):
    series = apps.get_model("series", "MetricSeries")
    metric = apps.get_model("series", "Metric")
    chunk = apps.get_model("series", "MetricChunk")

    def write(series_id, attempt, part):
        chunk.objects.create(
            series_id=series_id,
            attempt=attempt,
            first_step=part[0][0],
            last_step=part[-1][0],
            points=len(part),
            data=_pack(part),
        )

    for series_id in series.objects.filter(run__isnull=False).values_list("pk", flat=True):
        points = metric.objects.filter(series_id=series_id).order_by("step", "id")
        listed = points.values_list("attempt", "step", "value", "time").iterator(MAX_POINTS)
        # A chunk holds one attempt's points (a resumed run's are split where it resumed),
        # and at most MAX_POINTS: a series of millions is never in memory at once.
        part, attempt = [], None
        for row in listed:
            if part and (row[0] != attempt or len(part) == MAX_POINTS):
                write(series_id, attempt, part)
                part = []
            attempt = row[0]
            part.append(row[1:])
        if part:
            write(series_id, attempt, part)
        points.delete()


def chunks_to_rows(apps, schema_editor):
    metric = apps.get_model("series", "Metric")
    chunk = apps.get_model("series", "MetricChunk")
    # In the order stored: a repeated step's rows keep it in their ids.
    for stored in chunk.objects.order_by("id").iterator(100):
        data, count = bytes(stored.data), stored.points
        steps = np.frombuffer(data, "<i8", count, 0).tolist()
        values = np.frombuffer(data, "<f8", count, 8 * count)
        times = np.frombuffer(data, "<f8", count, 16 * count).tolist()
        metric.objects.bulk_create(
            metric(
                series_id=stored.series_id,
                attempt=stored.attempt,
                step=step,
                value=None if np.isnan(value) else float(value),
                time=time,
            )
            for step, value, time in zip(steps, values, times, strict=True)
        )
    chunk.objects.all().delete()


def compress(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    table = schema_editor.quote_name(apps.get_model("series", "MetricChunk")._meta.db_table)
    try:
        with transaction.atomic(using=schema_editor.connection.alias):
            schema_editor.execute(f"ALTER TABLE {table} ALTER COLUMN data SET COMPRESSION lz4")
    except DatabaseError:  # no lz4 in this server, or before PostgreSQL 14
        schema_editor.execute(f"ALTER TABLE {table} ALTER COLUMN data SET STORAGE EXTERNAL")


class Migration(migrations.Migration):
    dependencies = [("series", "0002_rollup_levels")]

    operations = [
        migrations.CreateModel(
            name="MetricChunk",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "attempt",
                    models.PositiveIntegerField(
                        help_text="The run attempt that logged the points; 0 for a host's series."
                    ),
                ),
                ("first_step", models.BigIntegerField()),
                ("last_step", models.BigIntegerField()),
                ("points", models.PositiveIntegerField()),
                ("data", models.BinaryField()),
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
                "indexes": [
                    models.Index(
                        fields=["series", "first_step", "last_step"],
                        name="metricchunk_series_steps",
                    )
                ],
            },
        ),
        migrations.RunPython(compress, migrations.RunPython.noop),
        migrations.RunPython(rows_to_chunks, chunks_to_rows),
        # A default first, so that going back can add the column to the telemetry rows.
        migrations.AlterField(
            model_name="metric",
            name="attempt",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RemoveField(model_name="metric", name="attempt"),
        migrations.AlterField(
            model_name="metric",
            name="time",
            field=models.FloatField(help_text="Unix seconds, as the host worker sampled it."),
        ),
    ]
