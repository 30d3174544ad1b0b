"""Checkpoints on the platform: what runs reported, what hosts uploaded, what is kept.

A run of a kind with the checkpoints capability (training) writes its
checkpoints on its host (workers.track); the host worker uploads each one
here, so a restarted attempt can resume on another host and users can
download them. Each file goes through the artifact store
(npulab.artifacts: chunked uploads, verification, storage, retention); the
``Checkpoint`` row is the truth about each checkpoint, its artifact about the
stored file. A checkpoint sharded across the ranks has rank 0's file on its row and each
other rank's as a ``CheckpointShard`` (uploaded as ``rank3-state.pt`` by the host that
holds the rank); it is ``stored``, and so a resume point, only once every shard is.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from django.core.files import File
from django.db import connection, transaction
from django.http import Http404
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
from npulab.checkpoints.models import Checkpoint, CheckpointShard
from npulab.core.errors import CHECKPOINT_DAMAGED, Conflict
from npulab.core.sql import table_name
from npulab.runs.models import Run
from workers.contract.ranks import file_rank, rank_file

STATE_FILE = "state.pt"


def record_checkpoint(run: Run, event: dict[str, Any]) -> Checkpoint | CheckpointShard | None:
    """A ``checkpoint`` event: the host has it; a later attempt's save of a step replaces it.

    One with a ``rank`` above 0 is that rank's shard of a sharded checkpoint.
    """
    step, size, sha256 = event.get("step"), event.get("bytes"), event.get("sha256")
    if not isinstance(step, int) or not isinstance(size, int) or not isinstance(sha256, str):
        return None
    defaults = {
        "attempt": run.attempt,
        "bytes": size,
        "sha256": sha256[:64],
        "host_path": str(event.get("path", ""))[:1000],
        "status": Checkpoint.Status.ON_HOST,
        "status_reason": "",
    }
    rank = event.get("rank") or 0
    if rank:
        shard, _ = CheckpointShard.objects.update_or_create(
            run=run, step=step, rank=rank, defaults=defaults
        )
        return shard
    checkpoint, _ = Checkpoint.objects.update_or_create(
        run=run, step=step, defaults={**defaults, "shards": event.get("shards") or 1}
    )
    return checkpoint


def mark_damaged(run: Run, step: Any, reason: str) -> None:
    """A ``checkpoint_damaged`` event: the run found it damaged on its host."""
    Checkpoint.objects.filter(run=run, step=step, status=Checkpoint.Status.ON_HOST).update(
        status=Checkpoint.Status.DAMAGED, status_reason=f"on the host: {reason}"[:500]
    )


def start_upload(checkpoint: Checkpoint | CheckpointShard) -> ArtifactUpload:
    """Open the artifact upload of a checkpoint's file (or a shard's), as its event declared
    it; a shard's file is named for its rank."""
    rank = checkpoint.rank if isinstance(checkpoint, CheckpointShard) else 0
    return do_create_upload(
        checkpoint.run_id,
        checkpoint.attempt,
        name=rank_file(STATE_FILE, rank),
        kind=Artifact.Kind.CHECKPOINT,
        size=checkpoint.bytes,
        sha256=checkpoint.sha256,
        step=checkpoint.step,
    )


def do_attach_artifact(artifact: Artifact, reason: str = "") -> Checkpoint | None:
    """A checkpoint's upload finished: its row follows the artifact, stored or damaged.

    A shard's file (``rank3-state.pt``) moves its shard's row; a sharded checkpoint is
    stored once its own file and every shard are, damaged as soon as one is.
    """
    if artifact.status == Artifact.Status.UPLOADING:
        return None
    if file_rank(artifact.name):
        _attach_shard(artifact, reason)
    checkpoint = (
        Checkpoint.objects.select_related("run", "artifact")
        .filter(run_id=artifact.run_id, step=artifact.step)
        .first()
    )
    if checkpoint is None:
        return None
    if file_rank(artifact.name):
        checkpoint.status, checkpoint.status_reason = _whole(checkpoint)
    elif artifact.status == Artifact.Status.STORED:
        checkpoint.artifact = artifact
        if artifact.pinned != checkpoint.pinned:
            do_pin_artifact(artifact, checkpoint.pinned)
        checkpoint.status, checkpoint.status_reason = _whole(checkpoint)
    else:
        checkpoint.status = Checkpoint.Status.DAMAGED
        checkpoint.status_reason = (reason or artifact.status_reason)[:500]
    checkpoint.save(update_fields=["status", "status_reason", "artifact", "updated"])
    apply_retention(checkpoint.run)
    return checkpoint


def _attach_shard(artifact: Artifact, reason: str) -> None:
    shard = CheckpointShard.objects.filter(
        run_id=artifact.run_id, step=artifact.step, rank=file_rank(artifact.name)
    ).first()
    if shard is None:
        return
    if artifact.status == Artifact.Status.STORED:
        shard.status, shard.status_reason, shard.artifact = Checkpoint.Status.STORED, "", artifact
        pinned = Checkpoint.objects.filter(
            run_id=artifact.run_id, step=artifact.step, pinned=True
        ).exists()
        if artifact.pinned != pinned:
            do_pin_artifact(artifact, pinned)
    else:
        shard.status = Checkpoint.Status.DAMAGED
        shard.status_reason = (reason or artifact.status_reason)[:500]
    shard.save(update_fields=["status", "status_reason", "artifact", "updated"])


def _whole(checkpoint: Checkpoint) -> tuple[str, str]:
    """A checkpoint whose own file is stored: stored too once every shard is; damaged when
    one is; else still on its hosts, saying which ranks' shards it waits for."""
    if checkpoint.artifact is None or checkpoint.artifact.status != Artifact.Status.STORED:
        return checkpoint.status, checkpoint.status_reason
    if checkpoint.shards <= 1:
        return Checkpoint.Status.STORED, ""
    shards = {
        shard.rank: shard
        for shard in CheckpointShard.objects.filter(run_id=checkpoint.run_id, step=checkpoint.step)
    }
    for rank, shard in sorted(shards.items()):
        if shard.status in (Checkpoint.Status.DAMAGED, Checkpoint.Status.DELETED):
            return Checkpoint.Status.DAMAGED, f"the shard of rank {rank}: {shard.status_reason}"[
                :500
            ]
    waiting = [
        rank
        for rank in range(1, checkpoint.shards)
        if rank not in shards or shards[rank].status != Checkpoint.Status.STORED
    ]
    if not waiting:
        return Checkpoint.Status.STORED, ""
    stored = checkpoint.shards - len(waiting)
    listed = ", ".join(str(rank) for rank in waiting[:8]) + (" …" if len(waiting) > 8 else "")
    return (
        Checkpoint.Status.ON_HOST,
        f"{stored} of {checkpoint.shards} shards stored; waiting for rank(s) {listed}",
    )


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
    """Whether a stored checkpoint's file, and each of its shards', is still the one
    uploaded; a bad one makes the checkpoint damaged."""
    artifact = checkpoint.artifact
    problem = None
    if artifact is None:
        problem = "no stored file"
    elif not do_verify_stored(artifact):
        problem = f"on the platform: {artifact.status_reason}"
    else:
        for shard in shards_of(checkpoint):
            if shard.artifact is None or not do_verify_stored(shard.artifact):
                why = shard.artifact.status_reason if shard.artifact else "no stored file"
                problem = f"the shard of rank {shard.rank}, on the platform: {why}"
                break
    if problem is None:
        return True
    checkpoint.status = Checkpoint.Status.DAMAGED
    checkpoint.status_reason = problem[:500]
    checkpoint.save(update_fields=["status", "status_reason", "updated"])
    return False


def shards_of(checkpoint: Checkpoint) -> list[CheckpointShard]:
    """The other ranks' shards of a sharded checkpoint, by rank (none for a whole one)."""
    if checkpoint.shards <= 1:
        return []
    return list(
        CheckpointShard.objects.filter(run_id=checkpoint.run_id, step=checkpoint.step)
        .select_related("artifact")
        .order_by("rank")
    )


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
        for rows in (Checkpoint.objects, CheckpointShard.objects):
            rows.filter(run=run, artifact__in=dropped, status=Checkpoint.Status.STORED).update(
                status=Checkpoint.Status.DELETED, status_reason=RETENTION_REASON
            )
    return sorted({artifact.step for artifact in dropped}, reverse=True)


def open_stored(checkpoint: Checkpoint, rank: int = 0) -> File:
    """A stored checkpoint's file (or its shard of ``rank``), read once to check it first:
    a bad copy is never served. Http404 for a rank it has no shard of."""
    if not verify_stored(checkpoint):
        raise Conflict(
            f"the checkpoint of step {checkpoint.step} is damaged: {checkpoint.status_reason}",
            code=CHECKPOINT_DAMAGED,
        )
    if rank:
        shard = next((shard for shard in shards_of(checkpoint) if shard.rank == rank), None)
        if shard is None or shard.artifact is None:
            raise Http404(f"the checkpoint of step {checkpoint.step} has no shard of rank {rank}")
        return open_artifact(shard.artifact)
    assert checkpoint.artifact is not None  # verified
    return open_artifact(checkpoint.artifact)


def do_pin_checkpoint(checkpoint: Checkpoint, pinned: bool) -> Checkpoint:
    """Pin (kept whatever the retention says) or unpin; the host hears of it with its next batch."""
    checkpoint.pinned = pinned
    checkpoint.save(update_fields=["pinned", "updated"])
    # The store's retention reads the artifact's pin: its shards' too.
    files = [checkpoint.artifact, *(shard.artifact for shard in shards_of(checkpoint))]
    for artifact in files:
        if artifact is not None:
            do_pin_artifact(artifact, pinned)
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
