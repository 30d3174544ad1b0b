"""What the training kind adds: restarts and the numbers it gives the upgrade review (its
checkpoints and resume are the checkpoints capability's: npulab.checkpoints)."""

from __future__ import annotations

import statistics
from typing import Any

import numpy as np

from npulab.runs.kinds import Headline, HeadlinePanel, RunKind
from npulab.runs.metric_stats import metric_stats
from npulab.runs.models import Run
from npulab.series import reads
from npulab.series.owners import Owner
from workers.contract.frameworks import PYTORCH

# The series workers.training's jobs (and workers.track users) log.
LOSS, THROUGHPUT = "loss", "samples_per_s"


class TrainingKind(RunKind):
    def max_restarts(self, run: Run) -> int:
        return int(run.spec.get("max_restarts", 0))

    def review_group(self, run: Run) -> str:
        """The entry with its arguments and what else changes the work done per step: only
        runs of the same job are compared (a seed is a repetition, not another job)."""
        spec = run.spec
        parts = [" ".join([str(spec.get("entry", "")), *map(str, spec.get("args") or [])])]
        if spec.get("precision", "fp32") != "fp32":
            parts.append(str(spec["precision"]))
        if spec.get("max_steps"):
            parts.append(f"{spec['max_steps']} steps")
        if run.devices > 1:
            parts.append(f"{run.devices} devices")
        if spec.get("framework", PYTORCH) != PYTORCH:
            # Another framework, mode or precision level is another job.
            parts.append(f"{spec['framework']} {spec.get('mode')} {spec.get('amp_level')}")
        return " · ".join(parts)

    def headlines(self, run: Run) -> dict[str, Headline]:
        """Its losses, and its throughput: the median of its samples/s series."""
        found = super().headlines(run)
        if "loss_last" not in found:
            found.update(_loss_headlines(run.pk))
        throughput = reads.read(Owner.of_run(run.pk), THROUGHPUT, points=reads.MAX_POINTS).values
        values = throughput[~np.isnan(throughput)]
        if len(values):
            found[THROUGHPUT] = Headline(statistics.median(values.tolist()))
        return found

    def review_headlines(self, runs: list[Run]) -> dict[int, dict[str, Headline]]:
        """Each run's headlines, and the seconds its loss took to reach a threshold all of
        them reached: the highest final loss among them."""
        found = {run.pk: self.headlines(run) for run in runs}
        finals = [h["loss_last"].value for h in found.values() if "loss_last" in h]
        if not finals:
            return found
        threshold = max(finals)
        key = f"seconds_to_loss≤{threshold:.4g}"
        for run_id, headlines in found.items():
            seconds = seconds_to_loss(run_id, threshold)
            if seconds is not None:
                headlines[key] = Headline(seconds, lower_is_better=True)
        return found


def _loss_headlines(run_id: int) -> dict[str, Headline]:
    """First and last finite loss of a run whose script did not use workers.track: its loss
    printed, written to TensorBoard or logged to MLflow (the first source that has one)."""
    found = reads.find(Owner.of_run(run_id), LOSS)
    if found is None:
        return {}
    values = reads.whole(found, with_time=False).columns["value"]
    finite = values[np.isfinite(values)]
    if len(finite) == 0:
        return {}
    return {
        "loss_first": Headline(float(finite[0]), lower_is_better=True),
        "loss_last": Headline(float(finite[-1]), lower_is_better=True),
    }


def seconds_to_loss(run_id: int, threshold: float) -> float | None:
    """Seconds from the run's first loss point to its first at or below ``threshold``, by
    the runner's clock; None when it has no loss series or never got there."""
    found = reads.find(Owner.of_run(run_id), LOSS)
    if found is None:
        return None
    points = reads.whole(found).columns
    # NaN (no value) is never at or below anything.
    reached = np.flatnonzero(points["value"] <= threshold)
    if len(reached) == 0:
        return None
    return max(0.0, (points["time"][reached[0]] - points["time"][0]).item())


def headline_panel(run: Run) -> dict[str, Any]:
    return {"metric_stats": metric_stats(run)}


TRAINING = TrainingKind(
    "training",
    shows_attempts=True,
    total_steps_field="max_steps",
    headline=HeadlinePanel("training/partials/headline.html", headline_panel, draws_metrics=True),
    headline_keys=frozenset({"loss_first", "loss_last"}),
    lower_is_better=frozenset({"loss_first", "loss_last"}),
)
