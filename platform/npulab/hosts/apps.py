from django.apps import AppConfig


class HostsConfig(AppConfig):
    name = "npulab.hosts"
    label = "hosts"
    verbose_name = "Accelerator hosts"
