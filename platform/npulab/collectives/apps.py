from django.apps import AppConfig


class CollectivesConfig(AppConfig):
    """The collectives run kind on the web side (its declaration: workers/kinds/collectives/)."""

    name = "npulab.collectives"
    label = "collectives"
    verbose_name = "Collective bandwidth runs"

    def ready(self) -> None:
        from npulab.collectives.kind import COLLECTIVES
        from npulab.runs import kinds

        kinds.register(COLLECTIVES)
