from django.apps import AppConfig


class AgentConfig(AppConfig):
    name = "npulab.agent"
    label = "agent"
    verbose_name = "Host agent API"

    def ready(self) -> None:
        from npulab.agent import schema  # noqa: F401 - registers the OpenAPI extension
