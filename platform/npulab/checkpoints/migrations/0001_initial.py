"""The Checkpoint model moves here from the runs app; its table (runs_checkpoint) and rows
stay where they are, so only Django's state changes (runs 0014 removes it there)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("artifacts", "0001_initial"),
        ("runs", "0013_run_project_no_default"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Checkpoint",
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
                        ("attempt", models.PositiveIntegerField()),
                        ("step", models.BigIntegerField()),
                        ("bytes", models.BigIntegerField()),
                        ("sha256", models.CharField(max_length=64)),
                        (
                            "host_path",
                            models.CharField(help_text="Where the host wrote it.", max_length=1000),
                        ),
                        (
                            "status",
                            models.CharField(
                                choices=[
                                    ("on_host", "On the host"),
                                    ("stored", "Stored"),
                                    ("damaged", "Damaged"),
                                    ("deleted", "Deleted"),
                                ],
                                default="on_host",
                                max_length=8,
                            ),
                        ),
                        ("status_reason", models.CharField(blank=True, max_length=500)),
                        (
                            "pinned",
                            models.BooleanField(
                                default=False, help_text="Kept whatever the retention says."
                            ),
                        ),
                        ("created", models.DateTimeField(auto_now_add=True)),
                        ("updated", models.DateTimeField(auto_now=True)),
                        (
                            "artifact",
                            models.ForeignKey(
                                blank=True,
                                help_text="The uploaded file in the artifact store.",
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to="artifacts.artifact",
                            ),
                        ),
                        (
                            "run",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="checkpoints",
                                to="runs.run",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "runs_checkpoint",
                        "ordering": ["-step"],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("run", "step"), name="one_checkpoint_per_step"
                            )
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
