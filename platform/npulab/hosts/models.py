from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.urls import reverse
from django.utils import timezone

from npulab.projects.models import Pool, default_pool_pk
from workers.contract.devices import DEVICE_TYPE_LABELS, DEVICE_TYPES
from workers.contract.tasks import host_queue

# Host names become Celery queue names (host.<name>) and URL segments.
HOST_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
host_name_validator = RegexValidator(
    HOST_NAME_PATTERN,
    "Use 1-63 lower-case letters, digits, '-' or '_', starting with a letter or digit.",
)


# The contract's device types, as model choices.
DeviceType = models.TextChoices(
    "DeviceType", [(name.upper(), (name, DEVICE_TYPE_LABELS[name])) for name in DEVICE_TYPES]
)


class Host(models.Model):
    """An accelerator host with one host worker, known by its token."""

    class Status(models.TextChoices):
        ONLINE = "online", "Online"
        OFFLINE = "offline", "Offline"

    name = models.CharField(max_length=63, unique=True, validators=[host_name_validator])
    device_type = models.CharField(max_length=8, choices=DeviceType.choices, default=DeviceType.CPU)
    device_count = models.PositiveIntegerField(default=0)
    devices = models.JSONField(default=list, blank=True, help_text="As the worker reported them.")
    # Set by an operator (host_token --labels, the admin): placement trusts these only.
    labels = models.JSONField(default=list, blank=True)
    # What the host's worker says of itself (NPULAB_LABELS): shown, never trusted.
    reported_labels = models.JSONField(default=list, blank=True)
    # The device type and count an operator accepted, or the host's own snapshot backed.
    accepted_device_type = models.CharField(max_length=8, blank=True)
    accepted_device_count = models.PositiveIntegerField(null=True, blank=True)
    # Why the registered device type or count waits for an operator ("" when it does not):
    # until accepted, no run is placed here.
    devices_unverified = models.CharField(max_length=200, blank=True)
    enabled = models.BooleanField(
        default=True, help_text="No new runs are placed on a disabled host."
    )
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.OFFLINE)
    last_heartbeat = models.DateTimeField(null=True, blank=True)
    snapshot_requested = models.BooleanField(
        default=False, help_text="The worker sends a snapshot with its next heartbeat."
    )
    registered = models.DateTimeField(null=True, blank=True)
    # Which projects' runs may come here (a project's pools); an operator moves it.
    # Without a field default: one would query at every Host() made in memory; ``save`` puts
    # a new host without a pool in the default one.
    pool = models.ForeignKey(
        Pool,
        on_delete=models.PROTECT,
        blank=True,
        related_name="hosts",
        help_text="Runs of the projects using this pool may be placed here.",
    )
    hostname = models.CharField(max_length=255, blank=True)
    # From the worker's config (docs/multihost.md): how other hosts reach this one.
    network = models.JSONField(
        default=dict,
        blank=True,
        db_default=models.Value({}, output_field=models.JSONField()),
        help_text="advertise_address, hccl_if_ip, hccl_socket_ifname, as the worker reported.",
    )
    worker_version = models.CharField(max_length=32, blank=True)
    python_version = models.CharField(max_length=32, blank=True)
    platform = models.CharField(max_length=255, blank=True)
    token_digest = models.CharField(max_length=64, unique=True, null=True, blank=True)
    token_display = models.CharField(max_length=16, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pool_id is None:
            self.pool_id = default_pool_pk()
        super().save(*args, **kwargs)

    def get_absolute_url(self) -> str:
        return reverse("hosts:host_detail", args=[self.name])

    @property
    def queue(self) -> str:
        return host_queue(self.name)

    def is_alive(self, now: datetime | None = None) -> bool:
        """True while the last heartbeat is recent enough to place runs here."""
        if self.last_heartbeat is None:
            return False
        timeout = timedelta(seconds=settings.NPULAB["HOST_HEARTBEAT_TIMEOUT_S"])
        return self.last_heartbeat >= (now or timezone.now()) - timeout
