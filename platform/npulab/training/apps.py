from django.apps import AppConfig


class TrainingConfig(AppConfig):
    """The training run kind on the web side (its declaration: workers/kinds/training/)."""

    name = "npulab.training"
    label = "training"
    verbose_name = "Training runs"

    def ready(self) -> None:
        from npulab.runs import events, kinds
        from npulab.training import kind
        from workers.kinds.training import CHECKPOINT_DAMAGED, RESUME

        kinds.register(kind.TRAINING)
        events.register_handler(CHECKPOINT_DAMAGED, kind.on_checkpoint_damaged)
        events.register_handler(RESUME, kind.on_resume)
