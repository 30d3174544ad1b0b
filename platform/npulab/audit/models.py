"""The audit log: who did what to which object, when, and why."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class AuditEntry(models.Model):
    """One action by a user, a host's worker or the platform itself, on one object.

    The target is named by type, id and label rather than a foreign key: the
    audit app sits below the apps whose objects it records, and an entry must
    outlive the object (a deleted host, a revoked token).
    """

    class ActorKind(models.TextChoices):
        USER = "user", "User"
        HOST = "host", "Host worker"
        SYSTEM = "system", "Platform"

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor_kind = models.CharField(max_length=8, choices=ActorKind.choices)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="audit_entries",
    )
    # The user's name or the host's at the time: kept when the user is deleted.
    actor_label = models.CharField(max_length=150)
    action = models.CharField(max_length=64, db_index=True)
    target_type = models.CharField(max_length=32)
    target_id = models.CharField(max_length=64)
    target_label = models.CharField(max_length=200, blank=True)
    note = models.TextField(blank=True)
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["target_type", "target_id", "-at"])]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        target = self.target_label or self.target_id
        return f"{self.actor_label} {self.action} {self.target_type} {target}"
