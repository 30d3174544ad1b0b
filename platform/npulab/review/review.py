"""The upgrade review: go / no-go for moving a host to a target environment, and why.

The target is another snapshot (a staging host already upgraded, say) or a
planned version set. The review puts side by side what changes, what the
compatibility rules say of the target, and how runs went under each.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from django.db.models import F

from npulab.runs.kinds import get as get_kind
from npulab.runs.kinds import judge
from npulab.runs.models import Run
from npulab.snapshots.compatibility import planned_compatibility, snapshot_compatibility
from npulab.snapshots.diff import diff
from npulab.snapshots.models import Snapshot
from workers.contract.compat import INCOMPATIBLE, OK

GO, CAUTION, NO_GO = "go", "caution", "no-go"
# A key metric this much worse under the target is a regression.
REGRESSION = 0.10


@dataclass
class Review:
    decision: str
    reasons: list[str]
    current: Snapshot
    target: Snapshot | None
    planned: dict[str, str] | None
    changes: dict[str, Any] | None
    compatibility: dict[str, Any]
    outcomes: list[dict[str, Any]] = field(default_factory=list)


def review(
    current: Snapshot, target: Snapshot | None = None, planned: dict | None = None
) -> Review:
    if (target is None) == (planned is None):
        raise ValueError("review a target snapshot or a planned version set, one of the two")
    if target is not None:
        changes = diff(current.data, target.data)
        compatibility = snapshot_compatibility(target.data)
    else:
        changes = None
        compatibility = planned_compatibility(current.data, planned)
    outcomes = compare_outcomes(run_outcomes(current), run_outcomes(target) if target else {})
    decision, reasons = decide(target, compatibility, outcomes)
    return Review(decision, reasons, current, target, planned, changes, compatibility, outcomes)


def run_outcomes(snapshot: Snapshot | None) -> dict[str, dict[str, Any]]:
    """Per run kind: how many runs under the snapshot, how they ended, median key numbers."""
    if snapshot is None:
        return {}
    kinds: dict[str, dict[str, Any]] = {}
    runs = Run.objects.filter(snapshot=snapshot).exclude(status__in=Run.ACTIVE)
    newest_first = runs.order_by(F("finished_at").desc(nulls_last=True), "-id")
    for run in newest_first.only("id", "kind", "status", "result", "exit_cause"):
        entry = kinds.setdefault(
            run.kind,
            {
                "runs": 0,
                "succeeded": 0,
                "failed": 0,
                "last": None,
                "numbers": {},
                "lower_is_better": set(),
                "last_succeeded": None,
            },
        )
        entry["runs"] += 1
        if run.status == Run.Status.SUCCEEDED:
            entry["succeeded"] += 1
        elif run.status == Run.Status.FAILED and not run.infrastructure_failure:
            entry["failed"] += 1
        if entry["last"] is None:
            entry["last"] = {"id": run.pk, "status": run.status}
        if run.status == Run.Status.SUCCEEDED and entry["last_succeeded"] is None:
            entry["last_succeeded"] = run.pk
        if run.status == Run.Status.SUCCEEDED:
            # The kind says which numbers are its headlines and which way is better.
            for key, headline in get_kind(run.kind).headlines(run).items():
                entry["numbers"].setdefault(key, []).append(headline.value)
                if headline.lower_is_better:
                    entry["lower_is_better"].add(key)
    for entry in kinds.values():
        entry["numbers"] = {key: statistics.median(v) for key, v in entry["numbers"].items()}
        entry["lower_is_better"] = sorted(entry["lower_is_better"])
    return kinds


def compare_outcomes(
    current: dict[str, dict[str, Any]], target: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    rows = []
    for kind in sorted(current.keys() | target.keys()):
        now, then = current.get(kind), target.get(kind)
        deltas = []
        if now and then:
            for key in sorted(now["numbers"].keys() & then["numbers"].keys()):
                before, after = now["numbers"][key], then["numbers"][key]
                lower = key in {*now["lower_is_better"], *then["lower_is_better"]}
                change, worse = judge(before, after, lower, REGRESSION)
                deltas.append(
                    {
                        "key": key,
                        "current": before,
                        "target": after,
                        "change": change,
                        "worse": worse,
                    }
                )
            deltas += result_changes(kind, now["last_succeeded"], then["last_succeeded"])
        rows.append({"kind": kind, "current": now, "target": then, "deltas": deltas})
    return rows


def result_changes(kind: str, current_id: int | None, target_id: int | None) -> list[dict]:
    """What the kind finds changed between the newest succeeded run on each side (an op
    matrix's regressions), beside the medians of the headline numbers."""
    if current_id is None or target_id is None:
        return []
    runs = Run.objects.in_bulk([current_id, target_id])
    return [
        {
            "key": row.name,
            "current": row.baseline,
            "target": row.candidate,
            "change": row.change,
            "worse": row.regression,
        }
        for row in get_kind(kind).result_changes(runs[current_id], runs[target_id])
    ]


def decide(
    target: Snapshot | None, compatibility: dict[str, Any], outcomes: list[dict[str, Any]]
) -> tuple[str, list[str]]:
    """No-go on a reason to stop; go only with evidence; caution in between."""
    stop, doubt = [], []
    if compatibility["verdict"] == INCOMPATIBLE:
        stop.append("the target is incompatible: " + "; ".join(_incompatible(compatibility)))
    elif compatibility["verdict"] != OK:
        doubt.append("compatibility is not fully known: " + "; ".join(_unknown(compatibility)))
    if target is not None:
        errors = [f for f in target.data["findings"] if f.get("severity") == "error"]
        if errors:
            stop.append("the target has errors: " + "; ".join(f["title"] for f in errors))
    target_runs = [row for row in outcomes if row["target"]]
    for row in target_runs:
        last = row["target"]["last"]
        if last["status"] == Run.Status.FAILED and row["target"]["failed"]:
            stop.append(f"the last {row['kind']} run under the target failed (run #{last['id']})")
        doubt += [_worse(row["kind"], delta) for delta in row["deltas"] if delta["worse"]]
    succeeded = [row for row in target_runs if row["target"]["succeeded"]]
    if not succeeded and target is not None:
        doubt.append(
            "no run has succeeded under the target yet: run a smoke test on a host with it"
        )
    elif not succeeded:
        doubt.append(
            "a planned target has no runs: upgrade a staging host, then review its snapshot"
        )
    if stop:
        return NO_GO, stop + doubt
    if doubt:
        return CAUTION, doubt
    kinds = ", ".join(row["kind"] for row in succeeded)
    return GO, [f"compatible, no error findings, {kinds} runs succeeded under the target"]


def _worse(kind: str, delta: dict[str, Any]) -> str:
    if delta["change"] is None:  # a count, such as op regressions, has no percentage
        return f"{kind} {delta['key']}: {delta['current']} → {delta['target']} under the target"
    return f"{kind} {delta['key']} {abs(delta['change']):.0%} worse under the target"


def _incompatible(compatibility: dict[str, Any]) -> list[str]:
    reasons = [
        f"{pair['pair']}: {pair['reason']}"
        for pair in compatibility.get("stack") or []
        if pair["verdict"] == INCOMPATIBLE
    ]
    python_stack = compatibility.get("python_stack") or {}
    reasons += [c["reason"] for c in python_stack.get("checks", []) if c["verdict"] == INCOMPATIBLE]
    return reasons


def _unknown(compatibility: dict[str, Any]) -> list[str]:
    reasons = [
        f"{pair['pair']}: {pair['reason']}"
        for pair in compatibility.get("stack") or []
        if pair["verdict"] != OK
    ]
    python_stack = compatibility.get("python_stack") or {}
    reasons += [c["reason"] for c in python_stack.get("checks", []) if c["verdict"] != OK]
    driver = compatibility.get("driver")
    if driver:
        reasons.append(driver["reason"])
    return reasons or ["nothing to check"]
