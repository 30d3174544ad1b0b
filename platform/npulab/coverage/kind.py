"""What the coverage kind shows: progress while it runs, its matrix, its cell-level diffs."""

from __future__ import annotations

from typing import Any

from npulab.coverage import compare as cell_compare
from npulab.coverage.matrix import progress
from npulab.runs.kinds import ComparePanel, Comparison, HeadlinePanel, RunKind
from npulab.runs.models import Run


class CoverageKind(RunKind):
    def result_changes(self, baseline: Run, candidate: Run) -> list[Comparison]:
        """Cells that stopped passing (a regression each) and cells that began to."""
        counts = cell_compare.compare(baseline, candidate).counts
        return [
            Comparison(
                "op_regressions",
                0,
                counts[cell_compare.REGRESSIONS],
                None,
                True,
                counts[cell_compare.REGRESSIONS] > 0,
            ),
            Comparison("op_fixes", 0, counts[cell_compare.FIXES], None, False, False),
        ]


def progress_panel(run: Run) -> dict[str, Any]:
    return {"coverage": progress(run)}


def compare_cells(runs: list[Run]) -> dict[str, Any]:
    """Each later run's cells against the first run's, counted by group."""
    first = runs[0]
    return {
        "coverage_baseline": first,
        "coverage_rows": [
            {"run": run, "counts": cell_compare.compare(first, run).counts} for run in runs[1:]
        ],
        "coverage_groups": cell_compare.GROUPS,
    }


COVERAGE = CoverageKind(
    "coverage",
    headline=HeadlinePanel("coverage/partials/progress.html", progress_panel),
    headline_keys=frozenset({"pass", "pass_rate"}),
    compare_panels=(ComparePanel("coverage/partials/compare_cells.html", compare_cells),),
)
