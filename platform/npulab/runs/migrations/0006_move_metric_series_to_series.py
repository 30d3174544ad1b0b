from django.db import migrations


class Migration(migrations.Migration):
    """The metric store moves to npulab.series: its models leave this app's state only.

    The tables stay; series.0001_initial takes them over (and renames them), so no point
    is copied or lost.
    """

    dependencies = [
        ("runs", "0005_exit_cause_from_the_contract"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="Metric"),
                migrations.DeleteModel(name="MetricRollup"),
                migrations.DeleteModel(name="MetricSeries"),
            ],
            database_operations=[],
        ),
    ]
