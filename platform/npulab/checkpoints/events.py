"""The checkpoints capability's event types on ingestion (npulab.runs.events handlers):
``checkpoint``, ``checkpoint_damaged`` and ``resume`` (workers.contract.capabilities)."""

from __future__ import annotations

import re
from typing import Any

from npulab.checkpoints.services import mark_damaged, record_checkpoint
from npulab.runs.events import Batch, MalformedEvent
from npulab.runs.models import RunAttempt
from npulab.series.ingest import drop_points_after
from npulab.series.owners import Owner
from workers.contract.ranks import MAX_RANKS

# A step, and a size, a signed 64-bit column holds; a SHA-256 as hex.
_MAX_STEP = 2**63 - 1
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")


def on_checkpoint(batch: Batch, event: dict[str, Any]) -> None:
    """A ``checkpoint`` event: the host has it.

    A line a user's script wrote itself with a step or size no checkpoint has, or a
    digest that is none, is kept as a visible ingest error, not a checkpoint row that
    could never be uploaded, downloaded or resumed from.
    """
    step, size, sha256 = event.get("step"), event.get("bytes"), event.get("sha256")
    if not 0 <= step <= _MAX_STEP:
        raise MalformedEvent(f"checkpoint.step must be 0 to {_MAX_STEP}")
    if not 0 <= size <= _MAX_STEP:
        raise MalformedEvent("checkpoint.bytes must be a size in bytes")
    if not _SHA256.match(sha256):
        raise MalformedEvent("checkpoint.sha256 must be 64 hexadecimal digits")
    shards, rank = event.get("shards", 1), event.get("rank", 0)
    if not 1 <= shards <= MAX_RANKS or not 0 <= rank < shards:
        raise MalformedEvent(f"checkpoint.rank must be 0 to shards - 1, shards 1 to {MAX_RANKS}")
    record_checkpoint(batch.run, event)


def on_checkpoint_damaged(batch: Batch, data: dict[str, Any]) -> None:
    """The run found a checkpoint damaged on its host: never resume from it."""
    mark_damaged(batch.run, data.get("step"), str(data.get("reason", "")))


def on_resume(batch: Batch, data: dict[str, Any]) -> None:
    """An attempt went on from a checkpoint: drop what it logs anew.

    That is the points after its step, or all of them when it found no
    checkpoint (step null). Points earlier in this batch were logged by the
    lost attempt too, so they go in first. Of a run across hosts, the points
    the new attempt's other hosts sent already (their ranks' series, which may
    come before rank 0's resume) stay.
    """
    step = data.get("step")
    batch.flush_points()
    keep = batch.run.attempt if batch.run.hosts > 1 else None
    drop_points_after(Owner.of_run(batch.run.pk), step, keep_attempt=keep)
    RunAttempt.objects.filter(run=batch.run, number=batch.run.attempt).update(
        resumed_from_step=step
    )
