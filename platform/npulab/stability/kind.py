"""What the stability kind shows and does: its verdict, its intervals, a compare of two runs,
the numbers and verdicts it gives the upgrade review, and the devices a fail marks bad."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from npulab.health.services import mark_device_bad
from npulab.runs.kinds import ComparePanel, Comparison, HeadlinePanel, RunKind
from npulab.runs.models import Run
from npulab.stability.reports import compare_rows, interval_grid
from npulab.stability.verdicts import RANK, run_verdict

HEADLINES = frozenset({"throughput", "worst_drop_pct", "peak_temperature_c"})
LOWER_IS_BETTER = frozenset({"worst_drop_pct", "peak_temperature_c"})


class StabilityKind(RunKind):
    def review_group(self, run: Run) -> str:
        """Throughput means something only for the same work on as many devices."""
        spec = run.spec
        parts = [str(spec.get("workload", "")), str(spec.get("dtype", ""))]
        if spec.get("size"):
            parts.append(f"size {spec['size']}")
        if run.devices > 1:
            parts.append(f"{run.devices} devices")
        return " · ".join(parts)

    def result_changes(self, baseline: Run, candidate: Run) -> list[Comparison]:
        """The verdict on each side (worse: a regression), and the consistency mismatches."""
        before, after = run_verdict(baseline), run_verdict(candidate)
        old = before["verdict"] if before else None
        new = after["verdict"] if after else None
        worse = old is not None and new is not None and RANK[new] > RANK[old]
        rows = [Comparison("verdict", old, new, None, True, worse)]
        mismatches = [
            (run.result.get("summary") or {}).get("mismatches") for run in (baseline, candidate)
        ]
        if all(isinstance(count, int) for count in mismatches):
            rows.append(
                Comparison(
                    "consistency_mismatches",
                    mismatches[0],
                    mismatches[1],
                    None,
                    True,
                    mismatches[1] > mismatches[0],
                )
            )
        return rows

    def check_submission(self, spec: dict[str, Any]) -> dict[str, str]:
        """Injected faults fail a run on purpose, and a fail marks devices bad: through the
        platform they are for test set-ups that allow them, not for anyone who may submit."""
        if spec.get("faults") and not settings.NPULAB["STABILITY_ALLOW_FAULTS"]:
            return {
                "faults": "fault injection is off on this platform "
                "(NPULAB_STABILITY_ALLOW_FAULTS); a run by hand takes it"
            }
        return {}

    def on_finished(self, run: Run) -> None:
        """A fail marks each device it names bad, and so its host degraded."""
        found = run_verdict(run)
        if not found or found["verdict"] != "fail" or run.host is None:
            return
        for bad in found["bad_devices"]:
            # The reason names the run's own device number; the index is the host's.
            mark_device_bad(run.host, bad["index"], f"stability: {bad['reason']}", run=run)


def verdict_panel(run: Run) -> dict[str, Any]:
    return {"stability": run_verdict(run), "stability_grid": interval_grid(run)}


def compare_panel(runs: list[Run]) -> dict[str, Any]:
    return {"stability_rows": compare_rows(runs)}


STABILITY = StabilityKind(
    "stability",
    headline=HeadlinePanel("stability/partials/verdict.html", verdict_panel),
    compare_panels=(ComparePanel("stability/partials/compare.html", compare_panel),),
    headline_keys=HEADLINES,
    lower_is_better=LOWER_IS_BETTER,
)
