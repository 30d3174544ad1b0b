from django.apps import AppConfig


class HandoffConfig(AppConfig):
    """The handoff capability on the web side (workers.contract.capabilities.HANDOFF): a file
    one host of a run uploads, which its other hosts of the same attempt fetch."""

    name = "npulab.handoff"
    label = "handoff"
    verbose_name = "Handoff between a run's hosts"

    def ready(self) -> None:
        from npulab.handoff.capability import HANDOFF
        from npulab.runs import capabilities

        capabilities.register(HANDOFF)
