"""The checkpoints capability's hooks in the generic run code (npulab.runs.capabilities)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404
from rest_framework.exceptions import ValidationError

from npulab.artifacts.models import Artifact, ArtifactUpload
from npulab.checkpoints.models import Checkpoint, CheckpointShard
from npulab.checkpoints.services import (
    do_attach_artifact,
    do_note_upload_waiting,
    pinned_steps,
    resume_point,
    shards_of,
    start_upload,
)
from npulab.hosts.models import Host
from npulab.runs import gangs
from npulab.runs.capabilities import Capability, UploadRefused
from npulab.runs.kinds import Panel
from npulab.runs.models import Run, RunAttempt
from npulab.runs.selectors import duration_text
from workers.contract import capabilities as contract
from workers.contract.capabilities import PINNED, RESUME_POINT, SHARDS
from workers.contract.ranks import file_rank

TEMPLATE = "checkpoints/partials/checkpoints.html"


def panel_context(run: Run) -> dict[str, Any]:
    return {"checkpoints": list(run.checkpoints.all())}


class CheckpointsCapability(Capability):
    def claim_reply(self, run: Run) -> dict[str, Any]:
        """Where the new attempt resumes: the newest stored checkpoint that verifies (each
        of its shards too, which the hosts of their ranks fetch)."""
        found = resume_point(run)
        if found is None:
            return {RESUME_POINT: None}
        point: dict[str, Any] = {"step": found.step, "bytes": found.bytes, "sha256": found.sha256}
        if found.shards > 1:
            point[SHARDS] = [
                {"rank": shard.rank, "bytes": shard.bytes, "sha256": shard.sha256}
                for shard in shards_of(found)
            ]
        return {RESUME_POINT: point}

    def acknowledgement(self, run: Run) -> dict[str, Any]:
        """The pinned steps, which the host keeps out of its own retention."""
        return {PINNED: pinned_steps(run)}

    def on_attempt_end(self, run: Run, now: datetime) -> None:
        """The host uploads an attempt's checkpoints before it reports the end: one still
        only on the host will not come (gone from it, or refused); it ends here, with the
        reason. A later upload of it (the same host sending what it left) stores it after all.
        """
        host = run.host.name if run.host else "?"
        Checkpoint.objects.filter(run=run, status=Checkpoint.Status.ON_HOST).update(
            status=Checkpoint.Status.DELETED,
            status_reason=f"not uploaded from {host} before attempt {run.attempt} ended",
            updated=now,
        )
        CheckpointShard.objects.filter(run=run, status=Checkpoint.Status.ON_HOST).update(
            status=Checkpoint.Status.DELETED,
            status_reason=f"not uploaded before attempt {run.attempt} ended",
            updated=now,
        )

    def open_upload(self, host: Host, run: Run, data: dict[str, Any]) -> ArtifactUpload:
        """A checkpoint names its step, and must match what that step's event declared; a
        shard (``rank3-state.pt``) what its rank's did, sent by the host that holds it."""
        if data.get("step") is None:
            raise ValidationError({"step": ["a checkpoint names its step"]})
        rank = file_rank(data["name"])
        checkpoint: Checkpoint | CheckpointShard
        if rank:
            checkpoint = get_object_or_404(CheckpointShard, run=run, step=data["step"], rank=rank)
        else:
            checkpoint = get_object_or_404(Checkpoint, run=run, step=data["step"])
        wrote = RunAttempt.objects.filter(run=run, number=checkpoint.attempt, host=host).exists()
        if not wrote and not gangs.uploads_file(run.pk, checkpoint.attempt, host, data["name"]):
            raise PermissionDenied(
                f"attempt {checkpoint.attempt} of run {run.pk} did not run on this host"
            )
        if (data["bytes"], data["sha256"].lower()) != (checkpoint.bytes, checkpoint.sha256):
            whose = f" (rank {rank})" if rank else ""
            raise UploadRefused(
                f"the checkpoint event of step {checkpoint.step}{whose} declared "
                f"{checkpoint.bytes} bytes and SHA-256 {checkpoint.sha256}"
            )
        return start_upload(checkpoint)

    def on_upload(self, artifact: Artifact, reason: str = "") -> None:
        do_attach_artifact(artifact, reason)

    def upload_waiting(self, run_id: int, step: int | None, reason: str) -> None:
        do_note_upload_waiting(run_id, step, reason)

    def cancel_warning(self, run: Run, now: datetime) -> str | None:
        newest = (
            Checkpoint.objects.filter(
                run=run, status__in=(Checkpoint.Status.ON_HOST, Checkpoint.Status.STORED)
            )
            .order_by("-step")
            .first()
        )
        if newest is None:
            return None
        return (
            f"The {duration_text(now - newest.created)} of work since the checkpoint of step "
            f"{newest.step} will be lost; a restart goes on from that checkpoint."
        )

    def resumes_from(self, run: Run) -> str:
        return "checkpoint" if run.checkpoints.exists() else ""


CHECKPOINTS = CheckpointsCapability(
    contract.CHECKPOINTS,
    panels=(Panel(TEMPLATE, panel_context),),
    artifact_kinds=frozenset({Artifact.Kind.CHECKPOINT}),
)
