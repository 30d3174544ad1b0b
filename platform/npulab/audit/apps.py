from django.apps import AppConfig


class AuditConfig(AppConfig):
    """Who did what: the audit log of actions on runs, hosts, snapshots and tokens."""

    name = "npulab.audit"
    label = "audit"
    verbose_name = "Audit log"
