"""What the smoke kind shows: its steps beside the run, its numbers side by side in a compare."""

from __future__ import annotations

from typing import Any

from npulab.runs.kinds import ComparePanel, RunKind
from npulab.runs.models import Run


def compare_numbers(runs: list[Run]) -> dict[str, Any]:
    """Each run's headline numbers beside the first run's, as the compare API judges them."""
    first = runs[0]
    table = [(run, {row.name: row for row in SMOKE.compare(first, run)}) for run in runs]
    keys = sorted({name for _, rows in table for name in rows if name != "status"})
    return {
        "number_keys": keys,
        "number_rows": [
            {"run": run, "cells": [rows.get(key) for key in keys]} for run, rows in table
        ],
    }


SMOKE = RunKind(
    "smoke",
    reports_steps=True,
    headline_keys=frozenset({"matmul_gflops", "steps_per_s"}),
    compare_panels=(ComparePanel("smoke/partials/compare_numbers.html", compare_numbers),),
)
