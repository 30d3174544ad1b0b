from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "npulab.runs"
    label = "runs"
    verbose_name = "Runs"
