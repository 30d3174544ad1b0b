import django.db.models.deletion
from django.db import migrations, models

STATE_FILE = "state.pt"


def stored_checkpoints_to_artifacts(apps, schema_editor):
    """Checkpoints stored before the artifact store: their files already are at its keys."""
    Checkpoint = apps.get_model("runs", "Checkpoint")
    Artifact = apps.get_model("artifacts", "Artifact")
    for checkpoint in Checkpoint.objects.filter(status="stored", artifact__isnull=True):
        checkpoint.artifact = Artifact.objects.create(
            run_id=checkpoint.run_id,
            attempt=checkpoint.attempt,
            kind="checkpoint",
            name=STATE_FILE,
            step=checkpoint.step,
            bytes=checkpoint.bytes,
            sha256=checkpoint.sha256,
            status="stored",
            storage_key=f"runs/{checkpoint.run_id}/checkpoints/{checkpoint.step}/{STATE_FILE}",
            pinned=checkpoint.pinned,
        )
        checkpoint.save(update_fields=["artifact"])


class Migration(migrations.Migration):
    dependencies = [
        ("artifacts", "0001_initial"),
        ("runs", "0006_move_metric_series_to_series"),
    ]

    operations = [
        migrations.AddField(
            model_name="checkpoint",
            name="artifact",
            field=models.ForeignKey(
                blank=True,
                help_text="The uploaded file in the artifact store.",
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="artifacts.artifact",
            ),
        ),
        migrations.RunPython(stored_checkpoints_to_artifacts, migrations.RunPython.noop),
    ]
