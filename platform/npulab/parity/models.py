"""A parity run's layers: one row per compared tensor, in execution order."""

from __future__ import annotations

from django.db import models

MAX_NAME_CHARS = 500
MAX_SHAPE_CHARS = 200


class ParityLayer(models.Model):
    """One layer's forward or backward tensor, side B against side A, as msprobe compared it
    and npulab's thresholds judged it."""

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="parity_layers")
    attempt = models.PositiveIntegerField(default=1)
    # Execution order (msprobe's row order).
    index = models.PositiveIntegerField()
    name = models.CharField(max_length=MAX_NAME_CHARS)
    dtype_a = models.CharField(max_length=40, blank=True)
    dtype_b = models.CharField(max_length=40, blank=True)
    shape_a = models.CharField(max_length=MAX_SHAPE_CHARS, blank=True)
    shape_b = models.CharField(max_length=MAX_SHAPE_CHARS, blank=True)
    cosine = models.FloatField(null=True, blank=True)
    euc_dist = models.FloatField(null=True, blank=True)
    max_abs_err = models.FloatField(null=True, blank=True)
    max_rel_err = models.FloatField(null=True, blank=True)
    one_thousandth_ratio = models.FloatField(null=True, blank=True)
    five_thousandth_ratio = models.FloatField(null=True, blank=True)
    # The thresholds it breaks (workers.kinds.parity.compare.BROKE_*); empty: none.
    broken = models.JSONField(default=list, blank=True)
    nan = models.BooleanField(default=False)
    # The script's frames of its call site, innermost first.
    stack = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["attempt", "index"]
        constraints = [
            models.UniqueConstraint(fields=["run", "attempt", "index"], name="parity_layer_unique")
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} layer {self.index} {self.name}"
