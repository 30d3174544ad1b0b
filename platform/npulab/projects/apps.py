from django.apps import AppConfig


class ProjectsConfig(AppConfig):
    """Projects (who may see and submit which runs), their members, and the host pools."""

    name = "npulab.projects"
    label = "projects"
    verbose_name = "Projects and pools"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db.models.signals import post_save

        from npulab.projects.services import on_user_saved

        post_save.connect(
            on_user_saved, sender=get_user_model(), dispatch_uid="npulab.projects.default_role"
        )
