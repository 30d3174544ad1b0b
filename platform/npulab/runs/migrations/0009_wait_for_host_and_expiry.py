# wait_for_host: a run no registered host could take waits, until queue_expires_at,
# instead of being refused; one still waiting then ends as the new status expired.
# Existing runs do not wait.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0008_run_idempotency_key"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="queue_expires_at",
            field=models.DateTimeField(
                blank=True,
                help_text="A run waiting for a host that could take it expires at this time.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="run",
            name="wait_for_host",
            field=models.BooleanField(
                db_default=False,
                default=False,
                help_text="Queued even if no registered host could take it, until one could.",
            ),
        ),
        migrations.AlterField(
            model_name="run",
            name="status",
            field=models.CharField(
                choices=[
                    ("queued", "Queued"),
                    ("dispatched", "Dispatched"),
                    ("running", "Running"),
                    ("succeeded", "Succeeded"),
                    ("failed", "Failed"),
                    ("cancelled", "Cancelled"),
                    ("lost", "Lost"),
                    ("expired", "Expired"),
                ],
                db_index=True,
                default="queued",
                max_length=12,
            ),
        ),
        migrations.AlterField(
            model_name="runattempt",
            name="status",
            field=models.CharField(
                choices=[
                    ("queued", "Queued"),
                    ("dispatched", "Dispatched"),
                    ("running", "Running"),
                    ("succeeded", "Succeeded"),
                    ("failed", "Failed"),
                    ("cancelled", "Cancelled"),
                    ("lost", "Lost"),
                    ("expired", "Expired"),
                ],
                default="running",
                max_length=12,
            ),
        ),
    ]
