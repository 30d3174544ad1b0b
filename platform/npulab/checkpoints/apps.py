from django.apps import AppConfig


class CheckpointsConfig(AppConfig):
    """The checkpoints capability on the web side (workers.contract.capabilities.CHECKPOINTS):
    checkpoint events, uploads, retention, pins and the resume point of a new attempt."""

    name = "npulab.checkpoints"
    label = "checkpoints"
    verbose_name = "Checkpoints"
    # Its pages hang under a run: /runs/<id>/checkpoints/.
    url_prefix = "runs/"

    def ready(self) -> None:
        from npulab.checkpoints import capability, events
        from npulab.checkpoints.api.serializers import CheckpointSerializer
        from npulab.runs import capabilities
        from npulab.runs import events as run_events
        from npulab.runs.api.serializers import add_detail_field
        from workers.contract.capabilities import CHECKPOINT_DAMAGED, RESUME
        from workers.contract.events import CHECKPOINT

        capabilities.register(capability.CHECKPOINTS)
        # Every run's detail lists its checkpoints (none for a kind without them).
        add_detail_field("checkpoints", lambda: CheckpointSerializer(many=True, read_only=True))
        run_events.register_handler(CHECKPOINT, events.on_checkpoint)
        run_events.register_handler(CHECKPOINT_DAMAGED, events.on_checkpoint_damaged)
        run_events.register_handler(RESUME, events.on_resume)
