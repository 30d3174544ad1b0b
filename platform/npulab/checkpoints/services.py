"""Checkpoints on the platform: what runs reported, what hosts uploaded, what is kept.

A run of a kind with the checkpoints capability (training) writes its
checkpoints on its host (workers.track); the host worker uploads each one
here, so a restarted attempt can resume on another host and users can
download them. Each file goes through the artifact store
(npulab.artifacts: chunked uploads, verification, storage, retention); the
``Checkpoint`` row is the truth about each checkpoint, its artifact about the
stored file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from django.core.files import File
from django.db import connection, transaction
from django.utils import timezone

from npulab.artifacts.models import Artifact, ArtifactUpload
from npulab.artifacts.services import (
    RETENTION_REASON,
    do_append_chunk,
    do_apply_retention,
    do_create_upload,
    do_damage_upload,
    do_pin_artifact,
    do_verify_stored,
    open_artifact,
)
from npulab.checkpoints.models import Checkpoint
from npulab.core.errors import CHECKPOINT_DAMAGED, Conflict
from npulab.core.sql import table_name
from npulab.runs.models import Run

STATE_FILE = "state.pt"


def record_checkpoint(run: Run, event: dict[str, Any]) -> Checkpoint | None:
    """A ``checkpoint`` event: the host has it; a later attempt's save of a step replaces it."""
    step, size, sha256 = event.get("step"), event.get("bytes"), event.get("sha256")
    if not isinstance(step, int) or not isinstance(size, int) or not isinstance(sha256, str):
        return None
    checkpoint, _ = Checkpoint.objects.update_or_create(
        run=run,
        step=step,
        defaults={
            "attempt": run.attempt,
            "bytes": size,
            "sha256": sha256[:64],
            "host_path": str(event.get("path", ""))[:1000],
            "status": Checkpoint.Status.ON_HOST,
            "status_reason": "",
        },
    )
    return checkpoint


def mark_damaged(run: Run, step: Any, reason: str) -> None:
    """A ``checkpoint_damaged`` event: the run found it damaged on its host."""
    Checkpoint.objects.filter(run=run, step=step, status=Checkpoint.Status.ON_HOST).update(
        status=Checkpoint.Status.DAMAGED, status_reason=f"on the host: {reason}"[:500]
    )


def start_upload(checkpoint: Checkpoint) -> ArtifactUpload:
    """Open the artifact upload of a checkpoint's file, as its event declared it."""
    return do_create_upload(
        checkpoint.run_id,
        checkpoint.attempt,
        name=STATE_FILE,
        kind=Artifact.Kind.CHECKPOINT,
        size=checkpoint.bytes,
        sha256=checkpoint.sha256,
        step=checkpoint.step,
    )


def do_attach_artifact(artifact: Artifact, reason: str = "") -> Checkpoint | None:
    """A checkpoint's upload finished: its row follows the artifact, stored or damaged."""
    checkpoint = (
        Checkpoint.objects.select_related("run")
        .filter(run_id=artifact.run_id, step=artifact.step)
        .first()
    )
    if checkpoint is None or artifact.status == Artifact.Status.UPLOADING:
        return checkpoint
    if artifact.status == Artifact.Status.STORED:
        checkpoint.status = Checkpoint.Status.STORED
        checkpoint.status_reason = ""
        checkpoint.artifact = artifact
        if artifact.pinned != checkpoint.pinned:
            do_pin_artifact(artifact, checkpoint.pinned)
    else:
        checkpoint.status = Checkpoint.Status.DAMAGED
        checkpoint.status_reason = (reason or artifact.status_reason)[:500]
    checkpoint.save(update_fields=["status", "status_reason", "artifact", "updated"])
    apply_retention(checkpoint.run)
    return checkpoint


def do_note_upload_waiting(run_id: int, step: int | None, reason: str) -> None:
    """A checkpoint whose upload the store cannot take now (full) says why on its row."""
    Checkpoint.objects.filter(run_id=run_id, step=step, status=Checkpoint.Status.ON_HOST).update(
        status_reason=reason[:500], updated=timezone.now()
    )


def store_upload(checkpoint: Checkpoint, chunks: Iterable[bytes]) -> Checkpoint:
    """A checkpoint file sent whole (one PUT): stored only if it matches its checksum."""
    upload = start_upload(checkpoint)
    received = 0

    def counted() -> Iterator[bytes]:
        nonlocal received
        for chunk in chunks:
            received += len(chunk)
            yield chunk

    body = counted()
    upload = do_append_chunk(upload.pk, 0, body)
    # Read what the store left unread (past the declared size), to say how much came.
    for _ in body:
        pass
    reason = (
        f"upload of {received} bytes does not match the checkpoint's {checkpoint.bytes} bytes "
        "and SHA-256"
    )
    if upload.artifact.status == Artifact.Status.UPLOADING:
        # The whole file was this one body: a short one will not be completed later.
        upload = do_damage_upload(upload, reason)
    attached = do_attach_artifact(upload.artifact, reason)
    return attached if attached is not None else checkpoint


def verify_stored(checkpoint: Checkpoint) -> bool:
    """Whether a stored checkpoint's file is still the one uploaded; a bad one becomes damaged."""
    artifact = checkpoint.artifact
    if artifact is not None and do_verify_stored(artifact):
        return True
    checkpoint.status = Checkpoint.Status.DAMAGED
    checkpoint.status_reason = (
        f"on the platform: {artifact.status_reason}" if artifact else "no stored file"
    )[:500]
    checkpoint.save(update_fields=["status", "status_reason", "updated"])
    return False


def _keep_a_verified_one(run: Run, keep: int) -> None:
    """Before retention deletes anything, one checkpoint it keeps must verify.

    The newest are kept; if the newest is silently corrupt, deleting the older
    ones would leave nothing to resume from. Kept ones that fail are marked
    damaged (and so leave the ranking) until one verifies or none is left.
    """
    while True:
        stored = list(
            Checkpoint.objects.filter(run=run, status=Checkpoint.Status.STORED)
            .select_related("artifact")
            .order_by("-step")
        )
        if len(stored) <= keep:
            return
        if any(verify_stored(checkpoint) for checkpoint in stored[:keep]):
            return


def apply_retention(run: Run) -> list[int]:
    """Keep what the artifact store's retention policy keeps; the rest is ``deleted``."""
    keep = int(run.spec.get("keep_checkpoints", 3))
    _keep_a_verified_one(run, keep)
    with transaction.atomic():
        dropped = do_apply_retention(run.pk, keep)
        Checkpoint.objects.filter(
            run=run, artifact__in=dropped, status=Checkpoint.Status.STORED
        ).update(status=Checkpoint.Status.DELETED, status_reason=RETENTION_REASON)
    return [artifact.step for artifact in dropped]


def open_stored(checkpoint: Checkpoint) -> File:
    """A stored checkpoint's file, read once to check it first: a bad copy is never served."""
    if not verify_stored(checkpoint):
        raise Conflict(
            f"the checkpoint of step {checkpoint.step} is damaged: {checkpoint.status_reason}",
            code=CHECKPOINT_DAMAGED,
        )
    assert checkpoint.artifact is not None  # verified
    return open_artifact(checkpoint.artifact)


def do_pin_checkpoint(checkpoint: Checkpoint, pinned: bool) -> Checkpoint:
    """Pin (kept whatever the retention says) or unpin; the host hears of it with its next batch."""
    checkpoint.pinned = pinned
    checkpoint.save(update_fields=["pinned", "updated"])
    # The store's retention reads the artifact's pin.
    if checkpoint.artifact is not None:
        do_pin_artifact(checkpoint.artifact, pinned)
    if not pinned:
        apply_retention(checkpoint.run)
    return checkpoint


def pinned_steps(run: Run) -> list[int]:
    """The run's pinned checkpoint steps, newest first.

    In plain SQL: every events batch's reply carries them, and the ORM's query cost four
    times the database's (docs/benchmarks.md).
    """
    with connection.cursor() as cursor:
        cursor.execute(_PINNED.format(table=table_name(Checkpoint)), [run.pk])
        return [step for (step,) in cursor.fetchall()]


_PINNED = "SELECT step FROM {table} WHERE run_id = %s AND pinned ORDER BY step DESC"


def resume_point(run: Run) -> Checkpoint | None:
    """The newest stored checkpoint that verifies: where a new attempt on any host resumes.

    Newer ones that fail are marked damaged on the way, so the host is never sent a file
    it would reject (and then start over from nothing).
    """
    stored = (
        Checkpoint.objects.filter(run=run, status=Checkpoint.Status.STORED)
        .select_related("artifact")
        .order_by("-step")
    )
    for checkpoint in stored:
        if verify_stored(checkpoint):
            return checkpoint
    return None
