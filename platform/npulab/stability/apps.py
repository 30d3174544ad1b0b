"""The stability run kind on the web side (its declaration: workers/kinds/stability/)."""

from django.apps import AppConfig


class StabilityConfig(AppConfig):
    """The stability run kind on the web side (its declaration: workers/kinds/stability/)."""

    name = "npulab.stability"
    label = "stability"
    verbose_name = "Stability runs"

    def ready(self) -> None:
        from npulab.runs import events, kinds
        from npulab.stability.ingest import on_interval
        from npulab.stability.kind import STABILITY
        from workers.kinds.stability import INTERVAL

        kinds.register(STABILITY)
        events.register_handler(INTERVAL, on_interval)
