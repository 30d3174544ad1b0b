"""Capabilities on the host: what the host worker does for one around a run attempt.

A capability (``workers.contract.capabilities``) that needs the host worker
has one module here (checkpoints: ``workers.host.checkpoints``) with a
subclass of ``AttemptCapability`` registered by name; ``RunExecution`` makes
one per attempt of a run whose kind declares it and calls its hooks at fixed
points, naming no capability itself:

| hook | when |
| --- | --- |
| ``directories`` | before the start: directories the run needs (given to the run user) |
| ``env`` | the run's environment variables (``NPULAB_CHECKPOINT_DIR``) |
| ``prepare`` | before the start, with the run's log (fetch the checkpoint to resume from) |
| ``acknowledged`` | the platform stored events of ``acted_on`` types; its last reply |
| ``finish`` | every event is stored, before the end is reported (uploads drained) |

What a capability does in the background (an upload, a fetch) stops when the attempt's
``give_up`` is set: the host worker is shutting down, and its next start takes it up.

Standard library only, Python 3.8.
"""

from __future__ import annotations

import importlib
import threading
from typing import TYPE_CHECKING, Any

from workers.contract import kinds
from workers.contract.capabilities import CHECKPOINTS, HANDOFF

if TYPE_CHECKING:
    from workers.events import EventWriter
    from workers.host.client import PlatformClient

# The host module of each capability that has one (profiling needs none: its traces are
# artifacts, which every run uploads).
MODULES = {CHECKPOINTS: "workers.host.checkpoints", HANDOFF: "workers.host.handoff"}


class Attempt:
    """What a capability's hooks know of the attempt: ids, directories, the claim reply."""

    def __init__(
        self,
        client: PlatformClient,
        run_id: int,
        attempt: int,
        run_dir: str,
        work_dir: str,
        claim: dict[str, Any],
        give_up: threading.Event | None = None,
    ) -> None:
        """``give_up``: set when the worker shuts down (never, where none is given)."""
        self.client = client
        self.run_id = run_id
        self.attempt = attempt
        self.run_dir = run_dir
        # Shared by every attempt of the run on this host.
        self.work_dir = work_dir
        self.claim = claim
        self.give_up = give_up or threading.Event()


class AttemptCapability:
    """One capability for one attempt; the defaults do nothing."""

    name = ""
    # The event types the forwarder parses and hands to ``acknowledged`` once stored.
    acted_on: tuple = ()

    def __init__(self, attempt: Attempt) -> None:
        self.attempt = attempt

    def directories(self) -> list[str]:
        return []

    def env(self) -> dict[str, str]:
        return {}

    def prepare(self, events: EventWriter) -> None:
        """Before the run starts; a line in ``events`` tells the run's log what happened."""

    def acknowledged(self, events: list[dict[str, Any]], reply: dict[str, Any]) -> None:
        """The platform stored ``events`` (of ``acted_on`` types); ``reply``: its last reply."""

    def finish(self) -> bool:
        """Once every event is stored; False when the attempt's ``give_up`` came first (the
        next worker start finishes it)."""
        return True


_registry: dict[str, type[AttemptCapability]] = {}


def register(capability: type[AttemptCapability]) -> type[AttemptCapability]:
    """Class decorator: the host side of the capability named ``capability.name``."""
    _registry[capability.name] = capability
    return capability


def for_kind(kind: str) -> list[type[AttemptCapability]]:
    """The host sides of the capabilities a kind declares, in its order."""
    declared = kinds.get(kind)
    if declared is None:
        return []
    found = []
    for name in declared.capabilities:
        if name in MODULES and name not in _registry:
            importlib.import_module(MODULES[name])
        if name in _registry:
            found.append(_registry[name])
    return found
