"""What the handoff capability reads: an attempt's stored files, and who may fetch them."""

from __future__ import annotations

from typing import Any

from npulab.artifacts.models import Artifact
from npulab.core.errors import HANDOFF_DAMAGED, Conflict
from npulab.hosts.models import Host
from npulab.runs.models import Placement, Run


def holds_placement(run: Run, host: Host, attempt: int) -> bool:
    """Whether ``host`` holds a share of the run's ``attempt``."""
    return Placement.objects.filter(run=run, attempt=attempt, host=host).exists()


def stored_files(run: Run) -> list[dict[str, Any]]:
    """The current attempt's stored handoff files: what a host fetches and checks."""
    found = Artifact.objects.filter(
        run=run, attempt=run.attempt, kind=Artifact.Kind.HANDOFF, status=Artifact.Status.STORED
    ).order_by("id")
    return [
        {
            "id": artifact.pk,
            "name": artifact.name,
            "bytes": artifact.bytes,
            "sha256": artifact.sha256,
        }
        for artifact in found
    ]


def file_for(run: Run, host: Host, file_id: int) -> Artifact | None:
    """A stored handoff file of the current attempt that ``host``, one of its hosts, may
    fetch; None if there is no such file for it."""
    if not holds_placement(run, host, run.attempt):
        return None
    return Artifact.objects.filter(
        pk=file_id,
        run=run,
        attempt=run.attempt,
        kind=Artifact.Kind.HANDOFF,
        status=Artifact.Status.STORED,
    ).first()


def damaged(artifact: Artifact) -> Conflict:
    """The answer for a stored file that no longer verifies: never served."""
    return Conflict(
        f"handoff file {artifact.name} is damaged: {artifact.status_reason}", code=HANDOFF_DAMAGED
    )
