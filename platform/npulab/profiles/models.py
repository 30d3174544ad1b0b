"""A run's profiles: each profiler trace it captured or someone imported, and its summary.

The trace's bytes are an artifact (``artifacts.Artifact`` of kind ``trace``, stored
compressed: ``*.json.gz`` for a Kineto/Chrome trace, ``*.tar.gz`` for a torch_npu
``*_ascend_pt`` folder). The profile adds what the platform computed from them once: the
summary, and where the timeline index lives.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from workers.contract.events import ASCEND, KINETO


class Profile(models.Model):
    """One profiler trace of a run: where it came from, its format, and its summary."""

    class Source(models.TextChoices):
        CAPTURED = "captured", "Captured by the run"
        IMPORTED = "imported", "Imported"

    class Format(models.TextChoices):
        KINETO = KINETO, "Kineto / Chrome trace"
        ASCEND = ASCEND, "Ascend profiler folder"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        SUMMARISING = "summarising", "Summarising"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="profiles")
    artifact = models.OneToOneField(
        "artifacts.Artifact",
        on_delete=models.CASCADE,
        related_name="profile",
        help_text="The stored trace (compressed) in the artifact store.",
    )
    name = models.CharField(max_length=255, help_text="The trace's file name, as stored.")
    source = models.CharField(max_length=8, choices=Source.choices)
    format = models.CharField(max_length=8, choices=Format.choices)
    status = models.CharField(max_length=11, choices=Status.choices, default=Status.PENDING)
    error = models.TextField(blank=True, help_text="Why summarising or indexing failed.")
    summary = models.JSONField(
        default=dict, blank=True, help_text="npulab.profiles.summary.summarise()'s result."
    )
    # The timeline index (npulab.profiles.timeline.build_index): its files live in the
    # artifacts storage under this prefix (see npulab.profiles.storage), what build_index
    # returned in ``index``.
    index_key = models.CharField(max_length=1000, blank=True)
    index = models.JSONField(default=dict, blank=True)
    bytes = models.BigIntegerField(help_text="The stored (compressed) trace's size.")
    rank = models.PositiveIntegerField(
        default=0,
        help_text="The global rank that recorded it: another rank than 0 names its trace for "
        "itself (rank3-trace-1.json.gz).",
    )
    raw_bytes = models.BigIntegerField(
        null=True, blank=True, help_text="The trace's size uncompressed, when known."
    )
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="Who imported it; empty for a captured trace.",
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)
    ready_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["run", "status"], name="profile_run_status")]

    def __str__(self) -> str:
        return f"run {self.run_id} profile {self.name}"

    @property
    def finished(self) -> bool:
        """Nothing more will happen to it (a page stops polling)."""
        return self.status in (self.Status.READY, self.Status.FAILED)
