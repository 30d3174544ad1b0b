"""What the training kind adds: restarts, its checkpoints panel and its resume events."""

from __future__ import annotations

from typing import Any

from npulab.runs.checkpoints import mark_damaged
from npulab.runs.events import Batch
from npulab.runs.kinds import Panel, RunKind
from npulab.runs.models import Run, RunAttempt
from npulab.series.ingest import drop_points_after
from npulab.series.owners import Owner


class TrainingKind(RunKind):
    def max_restarts(self, run: Run) -> int:
        return int(run.spec.get("max_restarts", 0))


def checkpoints_panel(run: Run) -> dict[str, Any]:
    return {"checkpoints": list(run.checkpoints.all())}


def on_checkpoint_damaged(batch: Batch, data: dict[str, Any]) -> None:
    """The run found a checkpoint damaged on its host: never resume from it."""
    mark_damaged(batch.run, data.get("step"), str(data.get("reason", "")))


def on_resume(batch: Batch, data: dict[str, Any]) -> None:
    """An attempt went on from a checkpoint: drop what it logs anew.

    That is the points after its step, or all of them when it found no
    checkpoint (step null). Points earlier in this batch were logged by the
    lost attempt too, so they go in first.
    """
    step = data.get("step")
    batch.flush_points()
    drop_points_after(Owner.of_run(batch.run.pk), step)
    RunAttempt.objects.filter(run=batch.run, number=batch.run.attempt).update(
        resumed_from_step=step
    )


TRAINING = TrainingKind(
    "training",
    shows_attempts=True,
    panels=(Panel("training/partials/checkpoints.html", checkpoints_panel),),
    headline_keys=frozenset({"loss_first", "loss_last"}),
    lower_is_better=frozenset({"loss_first", "loss_last"}),
)
