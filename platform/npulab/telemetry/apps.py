from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    """Device telemetry from the host workers: samples, their series and retention."""

    name = "npulab.telemetry"
    label = "telemetry"
    verbose_name = "Device telemetry"

    def ready(self) -> None:
        from npulab.hosts.pages import host_page
        from npulab.telemetry.views import host_telemetry_context

        host_page.add(host_telemetry_context)
