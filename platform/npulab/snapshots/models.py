from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse

from npulab.hosts.models import Host


class Snapshot(models.Model):
    """What was installed on one host, as seen from one Python environment.

    Stored once per distinct content (``content_hash`` of the stable part);
    ``first_seen`` / ``last_seen`` span every upload of that content.
    """

    content_hash = models.CharField(max_length=64, unique=True)
    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="snapshots")
    python = models.CharField(max_length=500, help_text="The interpreter it was seen from.")
    data = models.JSONField(help_text="The stable content: what is installed.")
    summary = models.JSONField(help_text="Key versions, derived from data.")
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    known_good_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    known_good_at = models.DateTimeField(null=True, blank=True)
    known_good_note = models.TextField(blank=True)

    class Meta:
        ordering = ["-last_seen", "-id"]

    def __str__(self) -> str:
        return f"{self.host} {self.short_hash}"

    def get_absolute_url(self) -> str:
        return reverse("snapshots:snapshot_detail", args=[self.pk])

    @property
    def short_hash(self) -> str:
        return self.content_hash[:12]

    @property
    def known_good(self) -> bool:
        return self.known_good_at is not None


class HostVersion(models.Model):
    """A step of a host environment's history: the host had ``snapshot`` in this span.

    A new step starts when an upload's content differs from the previous
    step's; going back to earlier content (a rollback) is a new step too.
    """

    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="versions")
    python = models.CharField(max_length=500)
    snapshot = models.ForeignKey(Snapshot, on_delete=models.CASCADE, related_name="versions")
    previous = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    change = models.TextField(
        blank=True, help_text="One line: what changed from the previous step."
    )
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    telemetry = models.JSONField(default=dict, blank=True, help_text="Readings of the last upload.")

    class Meta:
        ordering = ["-first_seen", "-id"]
        indexes = [
            models.Index(fields=["host", "python", "-first_seen"], name="hostversion_history"),
        ]

    def __str__(self) -> str:
        return f"{self.host} since {self.first_seen:%Y-%m-%d %H:%M}: {self.change}"
