from django.apps import AppConfig


class TrainingConfig(AppConfig):
    """The training run kind on the web side (its declaration: workers/kinds/training/)."""

    name = "npulab.training"
    label = "training"
    verbose_name = "Training runs"

    def ready(self) -> None:
        from npulab.runs import kinds
        from npulab.training import kind

        kinds.register(kind.TRAINING)
