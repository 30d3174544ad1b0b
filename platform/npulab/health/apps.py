from django.apps import AppConfig


class HealthConfig(AppConfig):
    """Host and device health: the rules, the states, draining, and who changed what."""

    name = "npulab.health"
    label = "health"
    verbose_name = "Host health"

    def ready(self) -> None:
        from npulab.health.selectors import host_health_context
        from npulab.health.services import on_samples_recorded
        from npulab.hosts.pages import host_page
        from npulab.telemetry.signals import samples_recorded

        samples_recorded.connect(on_samples_recorded, dispatch_uid="npulab.health.rules")
        host_page.add(host_health_context)
