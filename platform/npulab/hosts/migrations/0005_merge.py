"""Joins two steps made side by side: hosts' network settings, and reported labels."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("hosts", "0004_host_network"),
        ("hosts", "0004_reported_labels_accepted_devices"),
    ]

    operations = []
