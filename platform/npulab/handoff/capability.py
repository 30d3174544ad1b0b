"""The handoff capability's hooks in the generic run code (npulab.runs.capabilities).

A host of a run attempt uploads a file as an artifact of kind ``handoff`` (the generic
chunked upload, opened here); once it is stored, every events acknowledgement of the
attempt lists it, and the other hosts fetch it (``npulab.agent.api.handoff``). A parity
run's side A hands its dump to side B's host this way (docs/parity.md).
"""

from __future__ import annotations

from typing import Any

from npulab.artifacts.models import Artifact, ArtifactUpload
from npulab.artifacts.services import do_create_upload
from npulab.handoff.services import holds_placement, stored_files
from npulab.hosts.models import Host
from npulab.runs.capabilities import Capability, UploadRefused
from npulab.runs.models import Run
from workers.contract import capabilities as contract
from workers.contract.capabilities import HANDOFF_FILES


class HandoffCapability(Capability):
    def acknowledgement(self, run: Run) -> dict[str, Any]:
        """The attempt's stored files, for the hosts waiting for one (a single host has
        none to wait for)."""
        return {HANDOFF_FILES: stored_files(run)} if run.hosts > 1 else {}

    def open_upload(self, host: Host, run: Run, data: dict[str, Any]) -> ArtifactUpload:
        """A file of the current attempt, from one of its hosts, while the others run."""
        attempt = data.get("attempt") or run.attempt
        if not holds_placement(run, host, attempt):
            raise UploadRefused(f"attempt {attempt} of run {run.pk} has no share on this host")
        if attempt != run.attempt or not run.is_active:
            raise UploadRefused(
                f"attempt {attempt} of run {run.pk} is over: no host waits for its files"
            )
        return do_create_upload(
            run,
            attempt,
            name=data["name"],
            kind=Artifact.Kind.HANDOFF,
            size=data["bytes"],
            sha256=data["sha256"],
            step=data["step"],
        )


HANDOFF = HandoffCapability(contract.HANDOFF, artifact_kinds=frozenset({Artifact.Kind.HANDOFF}))
