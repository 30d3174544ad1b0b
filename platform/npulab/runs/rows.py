"""What one row of a run table says of the run's result, at a glance.

The run list answers "how did it go" without opening each run: a run with curves its first
metric (losses first) with steps done and a sparkline, else a succeeded run's headline
numbers; a failed run why. A page of rows costs two small reads per run with metrics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from npulab.runs.kinds import get as get_kind
from npulab.runs.models import Run
from npulab.runs.selectors import metric_keys
from npulab.series import reads
from npulab.series.owners import Owner

# Enough to tell runs apart in a row; the run page has them all.
HEADLINES_SHOWN = 2
SPARK_POINTS = 40
FAILED = (Run.Status.FAILED, Run.Status.LOST, Run.Status.EXPIRED)


@dataclass
class RowResult:
    numbers: list[tuple[str, str]] = field(default_factory=list)
    # "120 / 500 steps", or "" when the run has no steps to count.
    steps: str = ""
    spark_key: str = ""
    # None where a value is missing or not finite: the line has a gap there.
    spark: list[float | None] = field(default_factory=list)
    failure: str = ""
    failure_line: str = ""


def row_result(run: Run) -> RowResult:
    found = RowResult()
    if run.status in FAILED:
        # The diagnosis names the root cause; the exit reason is often a wrapper's last line.
        diagnosis = run.diagnosis or {}
        found.failure = diagnosis.get("category") or run.exit_cause_label
        lines = str(diagnosis.get("line") or run.exit_reason or "").strip().splitlines()
        found.failure_line = lines[0] if lines else ""
    if run.started_at is not None:
        _first_metric(run, found)
    if run.status == Run.Status.SUCCEEDED and not found.numbers:
        headlines = get_kind(run.kind).headlines(run)
        found.numbers = [
            (name, f"{headlines[name].value:.4g}") for name in sorted(headlines)[:HEADLINES_SHOWN]
        ]
    return found


def _first_metric(run: Run, found: RowResult) -> None:
    keys = metric_keys(run)
    if not keys:
        return
    key = keys[0]
    owner = Owner.of_run(run.pk)
    stored = reads.find(owner, key)
    series = reads.series(owner, key, points=SPARK_POINTS)
    values = [_finite(point[1]) for point in series["points"]]
    if not values:
        return
    last = next((value for value in reversed(values) if value is not None), None)
    if last is not None:
        found.numbers = [(key, f"{last:.4g}")]
    found.spark_key, found.spark = key, values
    # Steps done, as the run page counts them: a series logged from step 0 has done one more.
    last_step = series["points"][-1][0]
    if stored is not None and stored.last_step is not None:
        last_step = stored.last_step + (1 if stored.first_step == 0 else 0)
    total_field = get_kind(run.kind).total_steps_field
    total = int(run.spec.get(total_field) or 0) if total_field else 0
    found.steps = f"step {last_step} / {total}" if total else f"step {last_step}"


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
