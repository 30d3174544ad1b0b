"""Joins two steps made side by side: checkpoints moving to their own app, and placements."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0014_checkpoint_moved"),
        ("runs", "0014_placements"),
    ]

    operations = []
