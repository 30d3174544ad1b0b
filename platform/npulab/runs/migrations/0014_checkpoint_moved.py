"""The Checkpoint model leaves the runs app for npulab.checkpoints (its 0001); the table and
its rows stay, so only Django's state changes."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("checkpoints", "0001_initial"),
        ("runs", "0013_run_project_no_default"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="Checkpoint")],
            database_operations=[],
        ),
    ]
