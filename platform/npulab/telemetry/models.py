"""Device telemetry: the latest sample of each device, and the rollups of its readings.

The raw readings are series of the metric store (``npulab.series``: one series per host,
device and reading, step = Unix seconds); these tables hold what pages and /metrics read
without scanning a series, and what outlives the raw points.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.db import models
from django.db.models import Q

from workers.contract.telemetry import HEALTH_STATES, HEALTH_UNKNOWN

# Rollup.device for the host as a whole (a sample with index null): a unique index
# treats NULLs as distinct, and the rollup is written with one INSERT ... ON CONFLICT.
HOST_ITSELF = -1


class DeviceTelemetry(models.Model):
    """The newest sample of one device of a host (``device_index`` empty: the host itself)."""

    host = models.ForeignKey("hosts.Host", on_delete=models.CASCADE, related_name="telemetry")
    device_index = models.PositiveIntegerField(null=True, blank=True)
    time = models.FloatField(help_text="Unix seconds of the sample, as the host sampled it.")
    health = models.CharField(
        max_length=8, choices=[(state, state) for state in HEALTH_STATES], default=HEALTH_UNKNOWN
    )
    readings = models.JSONField(default=dict, blank=True)
    processes = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    received = models.DateTimeField(help_text="When the platform stored it.")
    unrolled_from = models.FloatField(
        null=True,
        blank=True,
        help_text="Raw points from this time on are not in the rollups yet.",
    )

    class Meta:
        verbose_name_plural = "device telemetry"
        ordering = ["host", "device_index"]
        constraints = [
            models.UniqueConstraint(
                fields=["host", "device_index"],
                condition=Q(device_index__isnull=False),
                name="telemetry_one_per_device",
            ),
            models.UniqueConstraint(
                fields=["host"],
                condition=Q(device_index__isnull=True),
                name="telemetry_one_per_host",
            ),
        ]

    def __str__(self) -> str:
        where = "host" if self.device_index is None else f"device {self.device_index}"
        return f"{self.host_id} {where} at {self.time}"

    @property
    def sampled_at(self) -> datetime:
        return datetime.fromtimestamp(self.time, tz=UTC)


# Rollup block sizes in seconds: a minute (from the raw points), ten minutes (from the
# minutes), an hour (from the ten minutes). A chart reads the coarsest that fits its buckets.
ROLLUP_SIZES = (60, 600, 3600)


class Rollup(models.Model):
    """One reading of one device over ``size`` seconds from ``start``: count, sum, minimum and
    maximum of its raw points.

    Kept NPULAB_TELEMETRY_ROLLUP_DAYS, long after the raw points (NPULAB_TELEMETRY_RAW_DAYS);
    charts of more than six hours read these.
    """

    # No constraint in the database: its check would lock the host's row (FOR KEY SHARE) for
    # every block written, against placement's locks on the hosts. Deleting a host deletes
    # these through Django.
    host = models.ForeignKey(
        "hosts.Host",
        on_delete=models.CASCADE,
        related_name="+",
        db_constraint=False,
        db_index=False,  # the unique constraint leads with it
    )
    device = models.IntegerField(help_text=f"The device index; {HOST_ITSELF} for the host itself.")
    reading = models.CharField(max_length=64)
    size = models.IntegerField(help_text="Seconds: 60, 600 or 3600.")
    start = models.BigIntegerField(help_text="Unix seconds of the block's start.")
    points = models.IntegerField()
    total = models.FloatField()
    minimum = models.FloatField()
    maximum = models.FloatField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["host", "device", "reading", "size", "start"], name="telemetry_rollup_block"
            ),
        ]
        indexes = [models.Index(fields=["start"], name="telemetry_rollup_age")]

    def __str__(self) -> str:
        return f"{self.host_id}/{self.device} {self.reading} @{self.start}+{self.size}"
