"""What the smoke kind shows: its steps beside the run, its numbers side by side in a compare."""

from __future__ import annotations

from typing import Any

from npulab.runs.kinds import ComparePanel, RunKind
from npulab.runs.models import Run

# Summary entries that are not numbers to compare.
_NOT_NUMBERS = ("steps", "stderr_tail")


def compare_numbers(runs: list[Run]) -> dict[str, Any]:
    """Each run's summary numbers, with the change from the first run."""

    def numbers(run: Run) -> dict[str, float]:
        summary = run.result.get("summary") or {}
        return {
            key: float(value)
            for key, value in summary.items()
            if key not in _NOT_NUMBERS
            and isinstance(value, int | float)
            and not isinstance(value, bool)
        }

    table = [(run, numbers(run)) for run in runs]
    keys = sorted({key for _, row in table for key in row})
    base = table[0][1] if table else {}
    rows = []
    for run, row in table:
        cells = []
        for key in keys:
            value, first = row.get(key), base.get(key)
            change = (value - first) / abs(first) if value is not None and first else None
            cells.append({"value": value, "change": change})
        rows.append({"run": run, "cells": cells})
    return {"number_keys": keys, "number_rows": rows}


SMOKE = RunKind(
    "smoke",
    reports_steps=True,
    compare_panels=(ComparePanel("smoke/partials/compare_numbers.html", compare_numbers),),
)
