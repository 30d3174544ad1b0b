"""Each metric's last and best value, for the numbers a run page puts beside its curves.

Read from the series store's coarsest rollups and newest chunk, so the cost does not grow
with the length of the run: the page asks again every second while the run is live.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from npulab.runs.models import Run
from npulab.runs.selectors import metric_keys
from npulab.series import reads
from npulab.series.owners import Owner

# A run page is not a metrics browser: past this many, the curves below have the rest.
MAX_STATS = 12
# Names whose smaller values are better; anything else (accuracy, throughput) is better big.
_LOWER_IS_BETTER = re.compile(r"loss|err|ppl|perplexity|latency|time|(^|_)[wc]er$", re.I)


@dataclass(frozen=True)
class MetricStat:
    key: str
    last: float | None
    best: float | None
    lower_is_better: bool
    step: int | None


def lower_is_better(key: str) -> bool:
    return bool(_LOWER_IS_BETTER.search(key.rsplit("/", 1)[-1]))


def metric_stats(run: Run, limit: int = MAX_STATS) -> list[MetricStat]:
    """The run's metrics in chart order (losses first), each with its last and best value."""
    owner = Owner.of_run(run.pk)
    found: list[MetricStat] = []
    for key in metric_keys(run)[:limit]:
        series = reads.find(owner, key)
        if series is None or not series.points:
            continue
        whole = reads.buckets(series, 1).columns
        lower = lower_is_better(key)
        best = _finite((whole["min"] if lower else whole["max"])[:1])
        newest = reads.recent(series.pk, run.attempt, 1)
        last = _finite(newest.values[-1:]) if len(newest) else None
        step = int(newest.steps[-1]) if len(newest) else series.last_step
        found.append(MetricStat(key, last, best, lower, step))
    return found


def _finite(values: np.ndarray) -> float | None:
    """The first of ``values`` (none: None), None where it is NaN or infinite."""
    if len(values) == 0:
        return None
    number = float(values[0])
    return number if math.isfinite(number) else None
