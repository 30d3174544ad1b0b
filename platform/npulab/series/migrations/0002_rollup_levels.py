"""Rollups of 100 and 10,000 steps beside those of 10 and 1,000 (npulab.series.rollups.SIZES).

Blocks already stored are combined into the new sizes here, from the next
finer size, so charts of existing series read from them at once.
"""

from django.db import migrations

# (new size, the stored size it is built from)
NEW_LEVELS = ((100, 10), (10_000, 1_000))


# A block's start as Python computes it (step - step % size, rounding down): SQL's %
# keeps the sign of the step, so a negative step needs the size added back.
_START = "start - ((start %% {size}) + {size}) %% {size}"


def build_levels(apps, schema_editor):
    rollup = apps.get_model("series", "MetricRollup")
    table = schema_editor.quote_name(rollup._meta.db_table)
    with schema_editor.connection.cursor() as cursor:
        for size, source in NEW_LEVELS:
            start = _START.format(size=int(size))
            cursor.execute(
                f"INSERT INTO {table} (series_id, size, start, points, counted, total, minimum, "
                f"maximum, first_step) SELECT series_id, %s, {start}, SUM(points), "
                "SUM(counted), SUM(total), MIN(minimum), MAX(maximum), MIN(first_step) "
                f"FROM {table} WHERE size = %s GROUP BY series_id, {start}",
                [size, source],
            )


def drop_levels(apps, schema_editor):
    rollup = apps.get_model("series", "MetricRollup")
    rollup.objects.filter(size__in=[size for size, _ in NEW_LEVELS]).delete()


class Migration(migrations.Migration):
    dependencies = [("series", "0001_initial")]

    operations = [migrations.RunPython(build_levels, drop_levels)]
