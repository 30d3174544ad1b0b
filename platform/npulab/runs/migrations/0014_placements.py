"""A run spans ``hosts`` hosts; each attempt owns one placement per host (issue 29).

Every existing attempt becomes one placement on its host (node rank 0, all the
run's devices), and a dispatched run not yet claimed gets its leased one, so
old runs read like any other.
"""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


STATES = {
    "running": "running",
    "succeeded": "succeeded",
    "failed": "failed",
    "cancelled": "stopped",
    "lost": "lost",
}


def one_placement_per_attempt(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    RunAttempt = apps.get_model("runs", "RunAttempt")
    Placement = apps.get_model("runs", "Placement")
    rows = []
    for attempt in RunAttempt.objects.select_related("run", "host").iterator():
        rows.append(
            Placement(
                run_id=attempt.run_id,
                attempt=attempt.number,
                host_id=attempt.host_id,
                host_name=attempt.host.name if attempt.host else "",
                device_indices=attempt.device_indices,
                ranks=attempt.run.devices,
                state=STATES.get(attempt.status, "failed"),
                exit_code=attempt.exit_code,
                exit_cause=attempt.exit_cause,
                exit_reason=attempt.exit_reason,
                leased_at=attempt.started_at,
                started_at=attempt.started_at,
                finished_at=attempt.finished_at,
            )
        )
    for run in Run.objects.filter(status="dispatched").select_related("host"):
        rows.append(
            Placement(
                run_id=run.pk,
                attempt=run.attempt,
                host_id=run.host_id,
                host_name=run.host.name if run.host else "",
                device_indices=run.device_indices,
                ranks=run.devices,
                state="leased",
                leased_at=run.dispatched_at or run.created,
            )
        )
    Placement.objects.bulk_create(rows, batch_size=1000, ignore_conflicts=True)


class Migration(migrations.Migration):
    dependencies = [
        ("hosts", "0004_host_network"),
        ("runs", "0013_run_project_no_default"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="hosts",
            field=models.PositiveSmallIntegerField(
                db_default=1,
                default=1,
                help_text="Hosts the run spans, each with `devices` devices.",
            ),
        ),
        migrations.AlterField(
            model_name="run",
            name="devices",
            field=models.PositiveSmallIntegerField(default=1, help_text="Devices on each host."),
        ),
        migrations.CreateModel(
            name="Placement",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("attempt", models.PositiveIntegerField()),
                ("node_rank", models.PositiveSmallIntegerField(default=0)),
                ("host_name", models.CharField(blank=True, max_length=63)),
                ("device_indices", models.JSONField(blank=True, default=list)),
                ("first_rank", models.PositiveIntegerField(default=0)),
                (
                    "ranks",
                    models.PositiveIntegerField(
                        default=1, help_text="Processes (ranks) on this host."
                    ),
                ),
                (
                    "master_port",
                    models.PositiveIntegerField(
                        blank=True,
                        help_text="Node rank 0: the rendezvous port on its host.",
                        null=True,
                    ),
                ),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("leased", "Leased"),
                            ("running", "Running"),
                            ("succeeded", "Succeeded"),
                            ("failed", "Failed"),
                            ("stopped", "Stopped"),
                            ("lost", "Lost"),
                        ],
                        default="leased",
                        max_length=10,
                    ),
                ),
                ("pid", models.IntegerField(blank=True, null=True)),
                ("exit_code", models.IntegerField(blank=True, null=True)),
                ("exit_cause", models.CharField(blank=True, default="", max_length=32)),
                ("exit_reason", models.TextField(blank=True, default="")),
                ("result", models.JSONField(blank=True, default=dict)),
                (
                    "events_offset",
                    models.BigIntegerField(
                        default=0, help_text="Bytes of this placement's events.jsonl stored so far."
                    ),
                ),
                ("leased_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("exited_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("last_heartbeat", models.DateTimeField(blank=True, null=True)),
                (
                    "host",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="placements",
                        to="hosts.host",
                    ),
                ),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="placements",
                        to="runs.run",
                    ),
                ),
            ],
            options={
                "ordering": ["attempt", "node_rank"],
                "indexes": [models.Index(fields=["host", "state"], name="placement_host_state")],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("run", "attempt", "node_rank"), name="one_placement_per_node_rank"
                    )
                ],
            },
        ),
        migrations.RunPython(one_placement_per_attempt, migrations.RunPython.noop),
    ]
