from django.apps import AppConfig


class SnapshotsConfig(AppConfig):
    name = "npulab.snapshots"
    label = "snapshots"
    verbose_name = "Environment snapshots"
