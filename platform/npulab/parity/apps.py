"""The parity run kind on the web side (its declaration: workers/kinds/parity/)."""

from django.apps import AppConfig


class ParityConfig(AppConfig):
    """The parity run kind on the web side (its declaration: workers/kinds/parity/)."""

    name = "npulab.parity"
    label = "parity"
    verbose_name = "Parity runs"

    def ready(self) -> None:
        from npulab.parity.ingest import on_layer
        from npulab.parity.kind import PARITY
        from npulab.runs import events, kinds
        from workers.kinds.parity import LAYER

        kinds.register(PARITY)
        events.register_handler(LAYER, on_layer)
