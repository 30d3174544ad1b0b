from django.apps import AppConfig


class SeriesConfig(AppConfig):
    name = "npulab.series"
    label = "series"
    verbose_name = "Time series"
