from django.apps import AppConfig
from django.db.models.signals import post_delete


class ArtifactsConfig(AppConfig):
    name = "npulab.artifacts"
    label = "artifacts"
    verbose_name = "Artifacts"

    def ready(self) -> None:
        from npulab.artifacts import services
        from npulab.artifacts.models import Artifact, ArtifactUpload

        # Rows go with their run (CASCADE); their files must not stay behind.
        post_delete.connect(services.on_artifact_deleted, sender=Artifact)
        post_delete.connect(services.on_upload_deleted, sender=ArtifactUpload)
