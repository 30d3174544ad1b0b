"""Checkpoints on the platform: what runs reported, what hosts uploaded, what is kept.

A training run writes its checkpoints on its host (workers.track); the host
worker uploads each one here, so a restarted attempt can resume on another
host and users can download them. Files live under NPULAB_ARTIFACT_DIR;
the ``Checkpoint`` row is the truth about each.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from npulab.runs.models import Checkpoint, Run

STATE_FILE = "state.pt"


def checkpoint_dir(run_id: int, step: int) -> Path:
    return Path(settings.NPULAB["ARTIFACT_DIR"]) / "runs" / str(run_id) / "checkpoints" / str(step)


def stored_file(checkpoint: Checkpoint) -> Path:
    return checkpoint_dir(checkpoint.run_id, checkpoint.step) / STATE_FILE


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


def store_upload(checkpoint: Checkpoint, chunks: Iterable[bytes]) -> Checkpoint:
    """Write an uploaded checkpoint file; it is stored only if it matches its checksum."""
    final = stored_file(checkpoint)
    final.parent.mkdir(parents=True, exist_ok=True)
    temporary = final.with_name(f".{STATE_FILE}.upload-{os.getpid()}")
    digest, size = hashlib.sha256(), 0
    with open(temporary, "wb") as handle:
        for chunk in chunks:
            digest.update(chunk)
            size += len(chunk)
            handle.write(chunk)
        handle.flush()
        os.fsync(handle.fileno())
    if size != checkpoint.bytes or digest.hexdigest() != checkpoint.sha256:
        temporary.unlink()
        checkpoint.status = Checkpoint.Status.DAMAGED
        checkpoint.status_reason = (
            f"upload of {size} bytes does not match the checkpoint's {checkpoint.bytes} bytes "
            "and SHA-256"
        )
    else:
        os.replace(temporary, final)
        checkpoint.status = Checkpoint.Status.STORED
        checkpoint.status_reason = ""
    checkpoint.save(update_fields=["status", "status_reason", "updated"])
    apply_retention(checkpoint.run)
    return checkpoint


@transaction.atomic
def apply_retention(run: Run) -> list[int]:
    """Keep the run's newest ``keep_checkpoints`` stored checkpoints and the pinned ones."""
    keep = int(run.spec.get("keep_checkpoints", 3))
    stored = list(
        Checkpoint.objects.select_for_update()
        .filter(run=run, status=Checkpoint.Status.STORED)
        .order_by("-step")
    )
    dropped = [c for c in stored[keep:] if not c.pinned]
    for checkpoint in dropped:
        shutil.rmtree(checkpoint_dir(run.pk, checkpoint.step), ignore_errors=True)
    Checkpoint.objects.filter(pk__in=[c.pk for c in dropped]).update(
        status=Checkpoint.Status.DELETED, status_reason="beyond the run's keep_checkpoints"
    )
    return [c.step for c in dropped]


def do_pin_checkpoint(checkpoint: Checkpoint, pinned: bool) -> Checkpoint:
    """Pin (kept whatever the retention says) or unpin; the host hears of it with its next batch."""
    checkpoint.pinned = pinned
    checkpoint.save(update_fields=["pinned", "updated"])
    if not pinned:
        apply_retention(checkpoint.run)
    return checkpoint


def pinned_steps(run: Run) -> list[int]:
    return list(Checkpoint.objects.filter(run=run, pinned=True).values_list("step", flat=True))


def resume_point(run: Run) -> Checkpoint | None:
    """The newest stored checkpoint: where a new attempt on any host resumes."""
    stored = Checkpoint.objects.filter(run=run, status=Checkpoint.Status.STORED)
    return stored.order_by("-step").first()
