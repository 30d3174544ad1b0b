"""Capabilities on the platform: what the generic run code asks of one.

A capability (``workers.contract.capabilities``: checkpoints, profiling) is
declared by a run kind and implemented by one app above runs
(``npulab.checkpoints``, ``npulab.profiles``), which registers a
``Capability`` from its ``AppConfig.ready``. The run code calls its hooks, for
the runs of kinds that declare it, at fixed points of a run's life, and names
no capability itself:

| hook | when |
| --- | --- |
| ``claim_reply`` | a host claims an attempt: fields for the reply (the resume point) |
| ``acknowledgement`` | each events batch is stored: fields for the reply (pinned steps) |
| ``on_attempt_end`` | an attempt ends, before the restart decision |
| ``open_upload``, ``on_upload``, ``upload_waiting`` | a file of its ``artifact_kinds``: |
| | declared, finished, waiting for room in the store |
| ``panels`` | the run page |
| ``cancel_warning``, ``resumes_from`` | what a cancel loses, what a restart goes on from |

Event types are handled the generic way (``npulab.runs.events.register_handler``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from workers.contract import capabilities as contract_capabilities
from workers.contract import kinds as contract_kinds

if TYPE_CHECKING:
    from npulab.artifacts.models import Artifact, ArtifactUpload
    from npulab.hosts.models import Host
    from npulab.runs.kinds import Panel
    from npulab.runs.models import Run


class UploadRefused(Exception):
    """A declared file does not match what the run's events said of it (answered 422)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@dataclass(frozen=True)
class Capability:
    """One capability's hooks; the defaults do nothing."""

    name: str
    # Cards on the page of a run whose kind declares the capability.
    panels: tuple[Panel, ...] = ()
    # The artifact kinds (``artifacts.Artifact.Kind``) whose uploads are this capability's.
    artifact_kinds: frozenset[str] = frozenset()

    def claim_reply(self, run: Run) -> dict[str, Any]:
        """Fields the claim reply adds for a new attempt of ``run``."""
        return {}

    def acknowledgement(self, run: Run) -> dict[str, Any]:
        """Fields every events acknowledgement of ``run`` adds (kept cheap: every batch)."""
        return {}

    def on_attempt_end(self, run: Run, now: datetime) -> None:
        """The running attempt of ``run`` ends (``run.host`` is still its host)."""

    def open_upload(self, host: Host, run: Run, data: dict[str, Any]) -> ArtifactUpload:
        """Open the upload of a declared file of one of ``artifact_kinds``; raise
        ``UploadRefused`` (422), a ValidationError, PermissionDenied or Http404."""
        raise NotImplementedError(f"the {self.name} capability takes no uploads")

    def on_upload(self, artifact: Artifact, reason: str = "") -> None:
        """A file of one of ``artifact_kinds`` finished uploading: stored or damaged."""

    def upload_waiting(self, run_id: int, step: int | None, reason: str) -> None:
        """A file of one of ``artifact_kinds`` (of ``step``) waits: the store cannot take it
        now, whether its declaration was refused or a chunk of it."""

    def cancel_warning(self, run: Run, now: datetime) -> str | None:
        """What cancelling the running ``run`` loses, if this capability keeps something."""
        return None

    def resumes_from(self, run: Run) -> str:
        """What a restart of ``run`` goes on from that this capability kept (a noun:
        "checkpoint"), or "" when nothing."""
        return ""


_registry: dict[str, Capability] = {}


def register(capability: Capability) -> Capability:
    """Add a capability's hooks; the name must be one the contract declares."""
    contract_capabilities.get(capability.name)
    _registry[capability.name] = capability
    return capability


def of_kind(kind: str) -> list[Capability]:
    """The registered capabilities a kind declares, in its order of declaration."""
    declared = contract_kinds.get(kind)
    if declared is None:
        return []
    return [_registry[name] for name in declared.capabilities if name in _registry]


def of(run: Run) -> list[Capability]:
    """The registered capabilities of ``run``'s kind."""
    return of_kind(run.kind)


def for_artifact(kind: str) -> Capability | None:
    """The capability whose uploads an artifact kind is (None: a plain artifact)."""
    for capability in _registry.values():
        if kind in capability.artifact_kinds:
            return capability
    return None
