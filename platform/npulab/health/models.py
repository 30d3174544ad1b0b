"""Host and device health: the state each is in, why, since when, and every change."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from npulab.hosts.models import Host


class HostState(models.TextChoices):
    HEALTHY = "healthy", "Healthy"
    DEGRADED = "degraded", "Degraded"
    UNHEALTHY = "unhealthy", "Unhealthy"
    OFFLINE = "offline", "Offline"
    DRAINED = "drained", "Drained"


class DeviceState(models.TextChoices):
    HEALTHY = "healthy", "Healthy"
    DEGRADED = "degraded", "Degraded"
    UNHEALTHY = "unhealthy", "Unhealthy"
    BAD = "bad", "Bad"


# States in which the scheduler places nothing new on the host or device.
HOST_STATES_CLOSED = (HostState.UNHEALTHY, HostState.OFFLINE, HostState.DRAINED)
DEVICE_STATES_CLOSED = (DeviceState.UNHEALTHY, DeviceState.BAD)


class HostHealth(models.Model):
    """A host's health: its state, the reasons for it and the drain an operator set.

    ``reasons`` is a list of ``{"rule", "detail", "device", "since", "level"}``
    (``device`` an index or None for the host itself, ``since`` ISO 8601),
    the host's own and its devices'. ``rule_state`` is the rules' small memory
    of this host (infrastructure failures in the window); nobody else reads it.
    """

    host = models.OneToOneField(Host, on_delete=models.CASCADE, related_name="health")
    state = models.CharField(max_length=10, choices=HostState.choices, default=HostState.HEALTHY)
    reasons = models.JSONField(default=list, blank=True)
    changed_at = models.DateTimeField(default=timezone.now)
    drained = models.BooleanField(default=False)
    drain_note = models.TextField(blank=True)
    drained_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    drained_at = models.DateTimeField(null=True, blank=True)
    rule_state = models.JSONField(default=dict, blank=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "host health"
        permissions = [
            ("operate_hosts", "Can drain and undrain hosts and clear bad devices (operator)")
        ]

    def __str__(self) -> str:
        return f"{self.host.name}: {self.state}"

    @property
    def closed(self) -> bool:
        """No new run is placed here."""
        return self.state in HOST_STATES_CLOSED


class DeviceHealth(models.Model):
    """One device's health; ``rule_state`` holds its rules' memory (hot samples, ECC baselines)."""

    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="device_health")
    index = models.PositiveIntegerField()
    state = models.CharField(
        max_length=10, choices=DeviceState.choices, default=DeviceState.HEALTHY
    )
    reasons = models.JSONField(default=list, blank=True)
    changed_at = models.DateTimeField(default=timezone.now)
    rule_state = models.JSONField(default=dict, blank=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["host", "index"]
        constraints = [
            models.UniqueConstraint(fields=["host", "index"], name="health_device_unique")
        ]
        verbose_name_plural = "device health"

    def __str__(self) -> str:
        return f"{self.host.name}/{self.index}: {self.state}"

    @property
    def closed(self) -> bool:
        return self.state in DEVICE_STATES_CLOSED


class HealthChange(models.Model):
    """A change of a host's or a device's state (``device`` None: the host), newest last.

    Kept for the host page's history, the audit of what the rules did, and the
    webhook, which delivers each one and notes here how that went.
    """

    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="health_changes")
    device = models.PositiveIntegerField(null=True, blank=True)
    previous = models.CharField(max_length=10)
    state = models.CharField(max_length=10)
    reasons = models.JSONField(default=list, blank=True)
    at = models.DateTimeField(default=timezone.now, db_index=True)
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    note = models.TextField(blank=True)
    webhook_delivered_at = models.DateTimeField(null=True, blank=True)
    webhook_error = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["host", "-at"])]

    def __str__(self) -> str:
        what = self.host.name if self.device is None else f"{self.host.name}/{self.device}"
        return f"{what}: {self.previous} → {self.state}"
