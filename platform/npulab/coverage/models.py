"""A coverage run's results: one row per op × variant × dtype × pass, and the run's plan."""

from __future__ import annotations

from django.db import models

from workers.kinds.coverage import FORWARD, PASSES, STATUSES

MAX_OP_CHARS = 200
MAX_ERROR_CHARS = 4000


def op_family(op: str) -> str:
    """The namespace an op belongs to (``nn.functional``, ``linalg``, ``aten``; else ``torch``)."""
    if "::" in op:
        return op.split("::", 1)[0]
    return op.rsplit(".", 1)[0] if "." in op else "torch"


class CoveragePlan(models.Model):
    """What a coverage run announced before its first result: how many rows to expect."""

    run = models.OneToOneField(
        "runs.Run", on_delete=models.CASCADE, primary_key=True, related_name="coverage_plan"
    )
    op_set = models.CharField(max_length=20, blank=True)
    total = models.PositiveIntegerField()
    # For op set ``model``: the ops the entry called (op, overload, dtypes, shapes, count).
    ops = models.JSONField(default=list, blank=True)

    def __str__(self) -> str:
        return f"run {self.run_id}: {self.total} results planned"


class OpResult(models.Model):
    """How one op × variant × dtype (forward, or its gradient) did on the run's device."""

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="op_results")
    op = models.CharField(max_length=MAX_OP_CHARS)
    variant = models.CharField(max_length=100, blank=True)
    dtype = models.CharField(max_length=20)
    # ``pass`` in the API and events.jsonl; a keyword in Python.
    phase = models.CharField(
        max_length=10, choices=[(name, name) for name in PASSES], default=FORWARD
    )
    # The op's namespace (``nn.functional``, ``linalg``, ``aten``; ``torch`` for plain ops).
    family = models.CharField(max_length=100, blank=True)
    status = models.CharField(max_length=12, choices=[(status, status) for status in STATUSES])
    error = models.TextField(blank=True)
    max_abs_err = models.FloatField(null=True, blank=True)
    max_rel_err = models.FloatField(null=True, blank=True)
    seconds = models.FloatField(default=0.0)
    samples = models.PositiveIntegerField(default=1)
    # Sample shapes, tolerances, the reference used, a warning's text, the signal.
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["op", "variant", "dtype", "phase"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "op", "variant", "dtype", "phase"], name="op_result_unique_cell"
            )
        ]
        indexes = [models.Index(fields=["run", "status"], name="op_result_run_status")]

    def __str__(self) -> str:
        variant = f".{self.variant}" if self.variant else ""
        return f"{self.op}{variant} {self.dtype} {self.phase}: {self.status}"

    @property
    def label(self) -> str:
        """The op as the matrix names it: ``name.variant``."""
        return f"{self.op}.{self.variant}" if self.variant else self.op
