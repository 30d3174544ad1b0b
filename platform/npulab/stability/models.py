"""A stability run's intervals: one row per device and interval, as its runner measured it."""

from __future__ import annotations

from django.db import models

from workers.kinds.stability import CONSISTENCY

MAX_ERROR_CHARS = 2000


class StabilityInterval(models.Model):
    """One device in one interval: how fast it went, whether its check held, its telemetry."""

    run = models.ForeignKey(
        "runs.Run", on_delete=models.CASCADE, related_name="stability_intervals"
    )
    attempt = models.PositiveIntegerField(default=1)
    interval = models.PositiveIntegerField()
    # The run's own device number (0 to devices - 1); the host's index is run.device_indices[n].
    device = models.PositiveIntegerField()
    seconds = models.FloatField(default=0.0)
    iterations = models.BigIntegerField(default=0)
    throughput = models.FloatField(null=True, blank=True)
    unit = models.CharField(max_length=20, blank=True)
    consistency = models.CharField(max_length=10, choices=[(name, name) for name in CONSISTENCY])
    max_rel_err = models.FloatField(null=True, blank=True)
    health = models.CharField(max_length=20, blank=True)
    # The device's readings in the interval (workers.contract.telemetry names).
    telemetry = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["attempt", "interval", "device"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "attempt", "interval", "device"], name="stability_interval_unique"
            )
        ]

    def __str__(self) -> str:
        return (
            f"run {self.run_id} interval {self.interval} device {self.device}: {self.consistency}"
        )
