from django.apps import AppConfig


class WebConfig(AppConfig):
    """The site layer: the dashboard, the health check, ``manage.py standalone``.

    Named ``web`` and not ``site``: an app called ``site`` would shadow the
    standard library's module.
    """

    name = "npulab.web"
    label = "web"
    verbose_name = "npulab site"
