from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "npulab.review"
    label = "review"
    verbose_name = "Upgrade review"
