from django.apps import AppConfig


class SnapshotsConfig(AppConfig):
    name = "npulab.snapshots"
    label = "snapshots"
    verbose_name = "Environment snapshots"

    def ready(self) -> None:
        from npulab.hosts.pages import host_page
        from npulab.snapshots.views import host_history_context

        host_page.add(host_history_context)
