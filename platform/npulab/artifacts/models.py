"""The artifact store's rows: every file a run produced, and the uploads in progress.

The store sits below the domain apps: it refers to runs by string and never
imports them, so any app (checkpoints today, traces and reports next) can
keep its files here.
"""

from __future__ import annotations

import uuid

from django.db import models

from workers.contract import capabilities as contract_capabilities
from workers.contract import capture


class Artifact(models.Model):
    """A file a run produced: declared by its host, stored here once its bytes verify."""

    class Kind(models.TextChoices):
        CHECKPOINT = "checkpoint", "Checkpoint"
        TRACE = "trace", "Trace"
        REPORT = "report", "Report"
        FILE = "file", "File"
        # Logged through MLflow's artifact API; its name is its path under the MLflow run's
        # artifacts.
        MLFLOW = capture.MLFLOW, "MLflow"
        # A file one host of a run hands to its other hosts (workers.contract.capabilities).
        HANDOFF = contract_capabilities.HANDOFF, "Handoff"

    class Status(models.TextChoices):
        UPLOADING = "uploading", "Uploading"
        STORED = "stored", "Stored"
        DAMAGED = "damaged", "Damaged"
        DELETED = "deleted", "Deleted"

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="artifacts")
    attempt = models.PositiveIntegerField()
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.FILE)
    name = models.CharField(max_length=255)
    step = models.BigIntegerField(null=True, blank=True, help_text="The run's step, if any.")
    bytes = models.BigIntegerField(help_text="The size the host declared; verified on upload.")
    sha256 = models.CharField(max_length=64, help_text="Declared by the host; verified on upload.")
    status = models.CharField(max_length=9, choices=Status.choices, default=Status.UPLOADING)
    status_reason = models.CharField(max_length=500, blank=True)
    storage_key = models.CharField(
        max_length=1000, blank=True, help_text="Its name in the artifacts storage, once stored."
    )
    pinned = models.BooleanField(default=False, help_text="Kept whatever the retention says.")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [
            models.Index(fields=["run", "kind", "status"], name="artifact_run_kind_status"),
        ]

    def __str__(self) -> str:
        step = f" step {self.step}" if self.step is not None else ""
        return f"run {self.run_id} {self.kind} {self.name}{step}"


class ArtifactUpload(models.Model):
    """A chunked upload of one artifact; its row says how many bytes are in, so a host resumes.

    The expected size and SHA-256 are the artifact's declared ones. Chunks are
    kept in the artifacts storage under ``uploads/<id>/`` until the last one
    arrives; ``parts`` lists their sizes in order, so the file is their
    concatenation whatever chunk size the host used.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    artifact = models.OneToOneField(Artifact, on_delete=models.CASCADE, related_name="upload")
    bytes_received = models.BigIntegerField(default=0)
    parts = models.JSONField(default=list, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"upload {self.pk} of {self.artifact}"

    @property
    def expected_bytes(self) -> int:
        return self.artifact.bytes

    @property
    def expected_sha256(self) -> str:
        return self.artifact.sha256

    @property
    def finished(self) -> bool:
        return self.artifact.status != Artifact.Status.UPLOADING
