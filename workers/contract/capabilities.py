"""Capabilities: behaviour a run kind declares it has, beyond what every run does.

A run is generic: it is queued, placed, claimed, runs as attempts, sends its
events and ends. What only some kinds do, keeping checkpoints and resuming
from them, or profiling a window of their loop, is a capability: named here,
declared by a kind (``Kind(capabilities=...)``), and implemented once on each
side by hooks that the generic code calls for the runs of kinds that declare
it (``npulab.runs.capabilities`` on the platform, ``workers.host.capabilities``
on the host). A capability may bring the spec fields and the event types of
its own; kinds that declare it get them.

Standard library only, Python 3.8: both sides import it.
"""

from __future__ import annotations

from workers.contract.events import CHECKPOINT, EventType
from workers.contract.spec import Field, profile_field

# Writes checkpoints on the host, which the host worker uploads; a new attempt, on any
# host, resumes from the newest stored one (docs/training.md).
CHECKPOINTS = "checkpoints"
# Profiles a window of its loop (the spec's ``profile``) and uploads the traces as
# artifacts, which become profiles on the platform (docs/profiles.md).
PROFILING = "profiling"
# Hands files from one host of a run to its other hosts through the platform: a parity run's
# side A, on a host of its own, gives its dump and losses to side B's host (docs/parity.md).
# The files are artifacts of this kind.
HANDOFF = "handoff"

# Written by workers.track while it resumes: the step an attempt went on from.
RESUME = "resume"
# Written by workers.track: a checkpoint on the host failed its manifest check.
CHECKPOINT_DAMAGED = "checkpoint_damaged"
# The fields of an events acknowledgement and of a claim reply that the checkpoints
# capability adds: the steps the host must keep, the checkpoint a new attempt resumes from
# (``step``, ``bytes``, ``sha256``, and for a sharded one ``shards``: each other rank's
# ``rank``, ``bytes`` and ``sha256``).
PINNED = "pinned"
RESUME_POINT = "resume"
SHARDS = "shards"
# The field of an events acknowledgement that the handoff capability adds: the current
# attempt's stored handoff files ([{"id", "name", "bytes", "sha256"}]).
HANDOFF_FILES = "handoff"
# The folder of a run directory where handed files arrive (``script_env.HANDOFF_DIR``), and
# the suffix of the note beside a file that could not be fetched: why, for the run to say.
HANDOFF_DIR_NAME = "handoff"
HANDOFF_FAILED = ".failed"


class Capability:
    """One capability: its name, what it means, its spec fields and event types."""

    def __init__(
        self,
        name: str,
        title: str,
        fields: tuple[Field, ...] = (),
        event_types: tuple[EventType, ...] = (),
    ) -> None:
        self.name = name
        self.title = title
        self.fields = fields
        self.event_types = {event_type.name: event_type for event_type in event_types}

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "title": self.title, "event_types": sorted(self.event_types)}


CAPABILITIES: dict[str, Capability] = {
    capability.name: capability
    for capability in (
        Capability(
            CHECKPOINTS,
            "Checkpoints: kept on the host and uploaded; a new attempt resumes from one.",
            event_types=(
                EventType(
                    CHECKPOINT,
                    {
                        "step": ("integer",),
                        "path": ("string",),
                        "bytes": ("integer",),
                        "sha256": ("string",),
                        "shards": ("integer",),
                        "rank": ("integer",),
                    },
                    ("step", "bytes", "sha256"),
                    "a checkpoint written on the host (with shards and rank: one rank's "
                    "shard of a checkpoint sharded across the ranks)",
                ),
                EventType(
                    RESUME,
                    {"step": ("integer", "null"), "path": ("string", "null")},
                    ("step",),
                    "an attempt went on from this checkpoint step (null: from the start)",
                ),
                EventType(
                    CHECKPOINT_DAMAGED,
                    {"step": ("integer",), "reason": ("string",)},
                    ("step",),
                    "a checkpoint on the host failed its manifest check",
                ),
            ),
        ),
        Capability(
            PROFILING,
            "Profiling: a window of the run's loop is traced; each trace becomes a profile.",
            fields=(profile_field(),),
        ),
        Capability(
            HANDOFF,
            "Handoff: a file one host of the run writes reaches its other hosts.",
        ),
    )
}


def get(name: str) -> Capability:
    """The capability of ``name``; KeyError names the known ones."""
    try:
        return CAPABILITIES[name]
    except KeyError:
        raise KeyError(
            f"unknown capability {name!r}; one of: {', '.join(sorted(CAPABILITIES))}"
        ) from None
