"""A series' rollup blocks move from a row each (``MetricRollup``) into rows of up to a
thousand blocks of one size as arrays (``MetricRollupSegment``).

On PostgreSQL the arrays are compressed with lz4 where the server has it, else stored
uncompressed, as the chunks' are (0003_chunks). The rows are packed here as
``npulab.series.rollups`` packs them, so that this migration does not change when that
module does.
"""

import django.db.models.deletion
import numpy as np
from django.db import DatabaseError, migrations, models, transaction

# npulab.series.rollups.SEGMENT when this was written: blocks a row holds at most.
SEGMENT = 256
# Rows written a statement, and old rows read a query.
BATCH = 2000


def _pack(blocks):
    """A row's data: first steps, point counts, finite counts (int64), then sums, minimums
    and maximums (float64, NaN for none), each column whole, little-endian."""
    _, points, counted, total, minimum, maximum, first_step = zip(*blocks, strict=True)
    return b"".join(
        (
            np.array(first_step, "<i8").tobytes(),
            np.array(points, "<i8").tobytes(),
            np.array(counted, "<i8").tobytes(),
            np.array(total, "<f8").tobytes(),  # None becomes NaN
            np.array(minimum, "<f8").tobytes(),
            np.array(maximum, "<f8").tobytes(),
        )
    )


def blocks_to_segments(apps, schema_editor):
    rollup = apps.get_model("series", "MetricRollup")
    segment = apps.get_model("series", "MetricRollupSegment")
    rows = rollup.objects.order_by("series_id", "size", "start").values_list(
        "series_id", "size", "start", "points", "counted", "total", "minimum", "maximum",
        "first_step",
    )  # fmt: skip
    made, key, blocks = [], None, []

    def close():
        series_id, size, number = key
        made.append(
            segment(
                series_id=series_id, size=size, segment=number, blocks=len(blocks), data=_pack(blocks)
            )
        )

    # Never more than a row's blocks and BATCH rows in memory: a database of ten million
    # points has a million blocks.
    for series_id, size, start, *rest in rows.iterator(BATCH):
        found = (series_id, size, start // (size * SEGMENT))
        if blocks and found != key:
            close()
            blocks = []
            if len(made) >= BATCH:
                segment.objects.bulk_create(made)
                made = []
        key = found
        blocks.append((start, *rest))
    if blocks:
        close()
    segment.objects.bulk_create(made)


def segments_to_blocks(apps, schema_editor):
    rollup = apps.get_model("series", "MetricRollup")
    segment = apps.get_model("series", "MetricRollupSegment")
    for row in segment.objects.order_by("id").iterator(100):
        count, size = row.blocks, row.size
        ints = np.frombuffer(bytes(row.data), "<i8", 3 * count).reshape(3, count)
        floats = np.frombuffer(bytes(row.data), "<f8", 3 * count, 24 * count).reshape(3, count)
        floats = [[None if value != value else value for value in column.tolist()] for column in floats]
        rollup.objects.bulk_create(
            rollup(
                series_id=row.series_id,
                size=size,
                start=first_step - first_step % size,
                points=points,
                counted=counted,
                total=total,
                minimum=minimum,
                maximum=maximum,
                first_step=first_step,
            )
            for first_step, points, counted, total, minimum, maximum in zip(
                *ints.tolist(), *floats, strict=True
            )
        )


def compress(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    table = schema_editor.quote_name(apps.get_model("series", "MetricRollupSegment")._meta.db_table)
    try:
        with transaction.atomic(using=schema_editor.connection.alias):
            schema_editor.execute(f"ALTER TABLE {table} ALTER COLUMN data SET COMPRESSION lz4")
    except DatabaseError:  # no lz4 in this server, or before PostgreSQL 14
        schema_editor.execute(f"ALTER TABLE {table} ALTER COLUMN data SET STORAGE EXTERNAL")


class Migration(migrations.Migration):
    dependencies = [("series", "0004_series_source")]

    operations = [
        migrations.CreateModel(
            name="MetricRollupSegment",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("size", models.IntegerField()),
                ("segment", models.BigIntegerField()),
                ("blocks", models.PositiveIntegerField()),
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
                "constraints": [
                    models.UniqueConstraint(
                        fields=("series", "size", "segment"), name="metricrollupsegment_key"
                    )
                ],
            },
        ),
        migrations.RunPython(compress, migrations.RunPython.noop),
        migrations.RunPython(blocks_to_segments, segments_to_blocks),
        migrations.DeleteModel(name="MetricRollup"),
    ]
