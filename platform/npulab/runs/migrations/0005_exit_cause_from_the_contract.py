from django.db import migrations, models


class Migration(migrations.Migration):
    """Exit causes come from the contract and the run kinds, not from database choices."""

    dependencies = [
        ("runs", "0004_metric_series_and_rollups"),
    ]

    operations = [
        migrations.AlterField(
            model_name="run",
            name="exit_cause",
            field=models.CharField(blank=True, default="", max_length=32),
        ),
        migrations.AlterField(
            model_name="runattempt",
            name="exit_cause",
            field=models.CharField(blank=True, max_length=32),
        ),
    ]
