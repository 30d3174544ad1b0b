"""What one row of a run table says of the run's result, at a glance.

The run list answers "how did it go" without opening each run: a run with curves its first
metric (losses first, as its charts) with steps done and a sparkline, else a succeeded
run's headline numbers; a failed run why. A page of rows costs two reads for all its runs'
series, then one downsampled read per run with curves (bench/run_list.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from npulab.runs.kinds import get as get_kind
from npulab.runs.models import Run
from npulab.runs.selectors import chart_order, series_label
from npulab.series import reads
from npulab.series.columns import as_python
from npulab.series.models import MetricSeries

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


@dataclass(frozen=True)
class _First:
    """A run's first chart: its label and the series as a read needs it."""

    label: str
    found: reads.Found


def row_results(runs: Iterable[Run]) -> dict[int, RowResult]:
    """The rows of a page of runs, by run id."""
    runs = list(runs)
    firsts = _first_series([run.pk for run in runs if run.started_at is not None])
    return {run.pk: _row(run, firsts.get(run.pk)) for run in runs}


def _first_series(run_ids: list[int]) -> dict[int, _First]:
    """Each run's first chart (losses first), whatever its source, with its first step."""
    chosen: dict[int, tuple] = {}
    rows = MetricSeries.objects.filter(run_id__in=run_ids).values_list(
        "run_id", "key", "source", "pk", "points", "last_step"
    )
    for run_id, key, source, pk, points, last_step in rows:
        order = chart_order(key, source)
        if run_id not in chosen or order < chosen[run_id][0]:
            chosen[run_id] = (order, key, source, pk, points, last_step)
    starts = reads.first_steps([row[3] for row in chosen.values()])
    return {
        run_id: _First(
            series_label(key, source),
            reads.Found(pk, points, starts.get(pk), last_step, source),
        )
        for run_id, (_, key, source, pk, points, last_step) in chosen.items()
    }


def _row(run: Run, first: _First | None) -> RowResult:
    found = RowResult()
    if run.status in FAILED:
        # The diagnosis names the root cause; the exit reason is often a wrapper's last line.
        diagnosis = run.diagnosis or {}
        found.failure = diagnosis.get("category") or run.exit_cause_label
        lines = str(diagnosis.get("line") or run.exit_reason or "").strip().splitlines()
        found.failure_line = lines[0] if lines else ""
    if first is not None:
        _first_metric(run, first, found)
    if run.status == Run.Status.SUCCEEDED and not found.numbers:
        headlines = get_kind(run.kind).headlines(run)
        found.numbers = [
            (name, f"{headlines[name].value:.4g}") for name in sorted(headlines)[:HEADLINES_SHOWN]
        ]
    return found


def _first_metric(run: Run, first: _First, found: RowResult) -> None:
    stored = first.found
    spark = reads.read_of(stored, points=SPARK_POINTS)
    if not len(spark.values):
        return
    # A bucket's mean is infinite where its sum overflowed: no point of the line either.
    values = as_python(np.where(np.isfinite(spark.values), spark.values, np.nan))
    last = next((value for value in reversed(values) if value is not None), None)
    if last is not None:
        found.numbers = [(first.label, f"{last:.4g}")]
    found.spark_key, found.spark = first.label, values
    # Steps done, as the run page counts them: a series logged from step 0 has done one more.
    last_step = int(spark.columns["step"][-1])
    if stored.last_step is not None:
        last_step = stored.last_step + (1 if stored.first_step == 0 else 0)
    total_field = get_kind(run.kind).total_steps_field
    total = int(run.spec.get(total_field) or 0) if total_field else 0
    found.steps = f"step {last_step} / {total}" if total else f"step {last_step}"
