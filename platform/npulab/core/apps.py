from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "npulab.core"
    label = "core"
    verbose_name = "npulab core"

    def ready(self) -> None:
        # Registers the ``<id:…>`` path converter before any URL module is read.
        from npulab.core import converters  # noqa: F401
