from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "npulab.core"
    label = "core"
    verbose_name = "npulab core"
