import uuid

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("runs", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="Artifact",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("attempt", models.PositiveIntegerField()),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("checkpoint", "Checkpoint"),
                            ("trace", "Trace"),
                            ("report", "Report"),
                            ("file", "File"),
                        ],
                        default="file",
                        max_length=16,
                    ),
                ),
                ("name", models.CharField(max_length=255)),
                ("step", models.BigIntegerField(blank=True, help_text="The run's step, if any.", null=True)),
                ("bytes", models.BigIntegerField(help_text="The size the host declared; verified on upload.")),
                ("sha256", models.CharField(help_text="Declared by the host; verified on upload.", max_length=64)),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("uploading", "Uploading"),
                            ("stored", "Stored"),
                            ("damaged", "Damaged"),
                            ("deleted", "Deleted"),
                        ],
                        default="uploading",
                        max_length=9,
                    ),
                ),
                ("status_reason", models.CharField(blank=True, max_length=500)),
                (
                    "storage_key",
                    models.CharField(
                        blank=True, help_text="Its name in the artifacts storage, once stored.", max_length=1000
                    ),
                ),
                ("pinned", models.BooleanField(default=False, help_text="Kept whatever the retention says.")),
                ("created", models.DateTimeField(auto_now_add=True)),
                ("updated", models.DateTimeField(auto_now=True)),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="artifacts", to="runs.run"
                    ),
                ),
            ],
            options={
                "ordering": ["-created", "-id"],
                "indexes": [models.Index(fields=["run", "kind", "status"], name="artifact_run_kind_status")],
            },
        ),
        migrations.CreateModel(
            name="ArtifactUpload",
            fields=[
                ("id", models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ("bytes_received", models.BigIntegerField(default=0)),
                ("parts", models.JSONField(blank=True, default=list)),
                ("created", models.DateTimeField(auto_now_add=True)),
                ("updated", models.DateTimeField(auto_now=True)),
                (
                    "artifact",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="upload",
                        to="artifacts.artifact",
                    ),
                ),
            ],
            options={
                "ordering": ["-created"],
            },
        ),
    ]
