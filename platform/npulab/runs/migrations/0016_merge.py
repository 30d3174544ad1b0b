"""Joins two steps made side by side: placements with moved checkpoints, and diagnoses."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0015_merge"),
        ("runs", "0014_run_diagnosis"),
    ]

    operations = []
