from django.apps import AppConfig


class SmokeConfig(AppConfig):
    """The smoke run kind on the web side (its declaration: workers/kinds/smoke/)."""

    name = "npulab.smoke"
    label = "smoke"
    verbose_name = "Smoke runs"

    def ready(self) -> None:
        from npulab.runs import kinds
        from npulab.smoke.kind import SMOKE

        kinds.register(SMOKE)
