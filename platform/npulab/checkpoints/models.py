"""The checkpoints capability's table: what a run reported, what its hosts uploaded."""

from __future__ import annotations

from django.db import models

from npulab.runs.models import Run


class CheckpointFile(models.Model):
    """What a host wrote and uploads: the part a checkpoint and each of its shards share."""

    class Status(models.TextChoices):
        ON_HOST = "on_host", "On the host"
        STORED = "stored", "Stored"
        DAMAGED = "damaged", "Damaged"
        DELETED = "deleted", "Deleted"

    attempt = models.PositiveIntegerField()
    step = models.BigIntegerField()
    bytes = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)
    host_path = models.CharField(max_length=1000, help_text="Where the host wrote it.")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.ON_HOST)
    status_reason = models.CharField(max_length=500, blank=True)
    # The stored file, in the artifact store; the artifact's own row says
    # whether it is stored, damaged or deleted.
    artifact = models.ForeignKey(
        "artifacts.Artifact",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The uploaded file in the artifact store.",
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class Checkpoint(CheckpointFile):
    """A checkpoint a run wrote: on its host, and stored here once uploaded."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="checkpoints")
    pinned = models.BooleanField(default=False, help_text="Kept whatever the retention says.")
    shards = models.PositiveIntegerField(
        default=1,
        help_text="Ranks it is sharded across (1: whole); it is stored once every rank's "
        "shard is (each downloads with ?rank=).",
    )

    class Meta:
        # The table the runs app created: the model moved here, its rows did not.
        db_table = "runs_checkpoint"
        ordering = ["-step"]
        constraints = [
            # A step saved again by a later attempt replaces the earlier one.
            models.UniqueConstraint(fields=["run", "step"], name="one_checkpoint_per_step")
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} step {self.step}"


class CheckpointShard(CheckpointFile):
    """One rank's shard (rank > 0) of a checkpoint sharded across a run's ranks.

    Rank 0's shard is the ``Checkpoint`` row itself; the step's checkpoint is complete, and
    a resume point, only once its file and every shard are stored. A shard may be reported
    before rank 0's checkpoint (another host's batch came first), so it names its run and
    step rather than the checkpoint's row.
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="checkpoint_shards")
    rank = models.PositiveIntegerField()

    class Meta:
        ordering = ["-step", "rank"]
        constraints = [
            models.UniqueConstraint(fields=["run", "step", "rank"], name="one_shard_per_rank")
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} step {self.step} rank {self.rank}"
