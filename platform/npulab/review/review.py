"""The upgrade review: go / no-go for moving a host to a target environment, and why.

The target is another snapshot (a staging host already upgraded, say) or a
planned version set. The review puts side by side what changes, what the
compatibility rules say of the target, and how runs went under each.

Evidence is pooled by stack (npulab.snapshots.stack), not by exact snapshot:
every run on any host whose snapshot has the current stack speaks for the
current side, and likewise for the target. Runs that ended through the
user's own doing (a job error, a spec the host refused, a cancel) are listed
apart and never count against an environment.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db.models import F

from npulab.review.versions import describe, unknown_versions
from npulab.runs import evidence as run_evidence
from npulab.runs.access import visible_runs
from npulab.runs.kinds import get as get_kind
from npulab.runs.kinds import judge
from npulab.runs.models import Run
from npulab.snapshots.compatibility import planned_compatibility, snapshot_compatibility
from npulab.snapshots.diff import diff
from npulab.snapshots.models import Snapshot
from npulab.snapshots.stack import (
    STACK_FIELDS,
    Stack,
    snapshots_with_stack,
    stack,
    stack_differences,
)
from workers.contract import diagnosis, exits
from workers.contract.compat import INCOMPATIBLE, OK

GO, CAUTION, NO_GO = "go", "caution", "no-go"
# A key number this much worse under the target is a regression, unless within the noise.
REGRESSION = 0.10
# How a run ends when the user, not the environment, stopped it.
USER_CAUSES = frozenset({exits.JOB_ERROR, exits.SPEC_INVALID, exits.CANCELLED})
# Distributions that are part of the stack, so not among "other" package differences.
STACK_PACKAGES = frozenset({"torch", "torch-npu", "mindspore"})


@dataclass
class Evidence:
    """The runs that speak for one side: those under any snapshot with its stack."""

    stack: Stack
    snapshots: list[Snapshot] = field(default_factory=list)
    # Ended runs that count, newest first.
    runs: list[Run] = field(default_factory=list)
    # Ended through the user's doing: listed, never counted.
    job_errors: list[Run] = field(default_factory=list)

    def describe(self) -> dict[str, Any]:
        return {
            "snapshots": [snapshot.pk for snapshot in self.snapshots],
            "hosts": sorted({snapshot.host.name for snapshot in self.snapshots}),
            "runs": len(self.runs),
        }


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
    current_stack: Stack = field(default_factory=dict)
    target_stack: Stack = field(default_factory=dict)
    # The stack parts that differ, then everything else that does (target snapshots only).
    stack_changes: list[dict[str, Any]] = field(default_factory=list)
    other_changes: dict[str, Any] | None = None
    numbers: list[dict[str, Any]] = field(default_factory=list)
    job_errors: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    unknown_versions: list[dict[str, Any]] = field(default_factory=list)
    evidence: dict[str, dict[str, Any]] = field(default_factory=dict)
    min_runs: int = 1

    @property
    def same_stack(self) -> bool:
        return self.current_stack == self.target_stack

    @property
    def stack_rows(self) -> list[dict[str, Any]]:
        """Each stack part on both sides, for a table."""
        return [
            {
                "name": label,
                "current": self.current_stack.get(key),
                "target": self.target_stack.get(key),
                "changed": self.current_stack.get(key) != self.target_stack.get(key),
            }
            for key, label in STACK_FIELDS
        ]


def review(
    current: Snapshot,
    target: Snapshot | None = None,
    planned: dict | None = None,
    viewer: Any = None,
) -> Review:
    """The go / no-go of moving ``current``'s host to ``target`` or a ``planned`` version set.

    The evidence is every project's runs on the machine; the job errors it lists
    by name are only those ``viewer`` may see (all of them without a viewer: the
    platform's own use).
    """
    if (target is None) == (planned is None):
        raise ValueError("review a target snapshot or a planned version set, one of the two")
    min_runs = settings.NPULAB["REVIEW_MIN_RUNS"]
    current_stack = stack(current.data)
    unknown: list[dict[str, Any]] = []
    changes = other = None
    if target is not None:
        target_stack = stack(target.data)
        changes = diff(current.data, target.data)
        other = other_changes(changes)
        compatibility = snapshot_compatibility(target.data)
    else:
        compatibility = planned_compatibility(current.data, planned)
        target_stack = planned_stack(current_stack, compatibility["target"], planned)
        unknown = unknown_versions(planned, current_stack)
        if target_stack == current_stack:
            # Nothing left to install: the current snapshot's own checks apply, driver included.
            compatibility = {
                **snapshot_compatibility(current.data),
                "target": compatibility["target"],
                "required": compatibility["required"],
            }
    now = evidence(current_stack)
    then = now if target_stack == current_stack else evidence(target_stack)
    numbers = compare_numbers(now, then, min_runs)
    outcomes = compare_outcomes(run_outcomes(now), run_outcomes(then), numbers)
    result = Review(
        decision="",
        reasons=[],
        current=current,
        target=target,
        planned=planned,
        changes=changes,
        compatibility=compatibility,
        outcomes=outcomes,
        current_stack=current_stack,
        target_stack=target_stack,
        stack_changes=stack_differences(current_stack, target_stack),
        other_changes=other,
        numbers=numbers,
        job_errors={
            "current": _listed(now.job_errors, viewer),
            "target": _listed(then.job_errors, viewer),
        },
        unknown_versions=unknown,
        evidence={"current": now.describe(), "target": then.describe()},
        min_runs=min_runs,
    )
    result.decision, result.reasons = decide(result)
    return result


def planned_stack(current: Stack, target: dict[str, Any], planned: dict[str, str]) -> Stack:
    """The current stack with the planned versions in (torch following torch_npu's release).

    A planned Python names a release line (3.11); the current patch release stands for it
    when it is on that line, so planning what is installed gives the current stack.
    """
    python = current.get("python")
    wanted_python = planned.get("python")
    if wanted_python and not _same_line(python, wanted_python):
        python = wanted_python
    return {
        **current,
        "cann": target.get("cann"),
        "torch": target.get("torch"),
        "torch_npu": target.get("torch_npu"),
        "python": python,
    }


def evidence(wanted: Stack) -> Evidence:
    """The ended runs under every snapshot with this stack, the user's own failures apart."""
    snapshots = snapshots_with_stack(wanted)
    found = Evidence(wanted, snapshots)
    runs = (
        Run.objects.filter(snapshot__in=[snapshot.pk for snapshot in snapshots])
        .exclude(status__in=Run.ACTIVE)
        .order_by(F("finished_at").desc(nulls_last=True), "-id")
    )
    for run in runs:
        (found.job_errors if user_caused(run) else found.runs).append(run)
    return found


def user_caused(run: Run) -> bool:
    """The run ended through the user's doing: its own code, its spec, a cancel, or a
    failure its diagnosis blames on the user's code (docs/diagnosis.md)."""
    return (
        run.status == Run.Status.CANCELLED
        or run.exit_cause in USER_CAUSES
        or (
            run.status == Run.Status.FAILED
            and (run.diagnosis or {}).get("blame") == diagnosis.USER_CODE
        )
    )


def run_outcomes(found: Evidence) -> dict[str, dict[str, Any]]:
    """Per run kind: how many runs count, how they ended, the newest, the job errors apart."""
    kinds: dict[str, dict[str, Any]] = {}

    def entry(kind: str) -> dict[str, Any]:
        return kinds.setdefault(
            kind,
            {
                "runs": 0,
                "succeeded": 0,
                "failed": 0,
                "infrastructure": 0,
                "job_errors": 0,
                "last": None,
                "last_succeeded": None,
                "numbers": {},
                "lower_is_better": [],
            },
        )

    for run in found.runs:
        row = entry(run.kind)
        row["runs"] += 1
        if run.status == Run.Status.SUCCEEDED:
            row["succeeded"] += 1
            if row["last_succeeded"] is None:
                row["last_succeeded"] = run.pk
        elif run.infrastructure_failure:
            row["infrastructure"] += 1
        elif run.status == Run.Status.FAILED:
            row["failed"] += 1
        if row["last"] is None:
            row["last"] = {"id": run.pk, "status": run.status}
    for run in found.job_errors:
        entry(run.kind)["job_errors"] += 1
    return kinds


def compare_numbers(current: Evidence, target: Evidence, min_runs: int) -> list[dict[str, Any]]:
    """Each headline of each kind and group: median, min, max and n on both sides, the
    change, and whether it is a regression (past the threshold and outside the noise)."""
    sides = {"current": current, "target": target}
    groups: dict[tuple[str, str], dict[int, Run]] = defaultdict(dict)
    members: dict[str, set[int]] = {name: set() for name in sides}
    for name, found in sides.items():
        for run in found.runs:
            if run.status == Run.Status.SUCCEEDED:
                kind = get_kind(run.kind)
                groups[(run.kind, kind.review_group(run))][run.pk] = run
                members[name].add(run.pk)
    rows = []
    for (kind_name, group), runs in sorted(groups.items()):
        headlines = get_kind(kind_name).review_headlines(list(runs.values()))
        # Evidence any run may carry (a profile's step time), under the kind's own numbers.
        for run_id, extra in run_evidence.for_runs(list(runs.values())).items():
            headlines[run_id] = {**extra, **headlines.get(run_id, {})}
        keys = sorted({key for found in headlines.values() for key in found})
        for key in keys:
            values: dict[str, list[float]] = {name: [] for name in sides}
            lower = False
            for run_id, found in headlines.items():
                # A NaN loss is no evidence, and JSON cannot carry it.
                if key not in found or not math.isfinite(found[key].value):
                    continue
                lower = lower or found[key].lower_is_better
                for name in sides:
                    if run_id in members[name]:
                        values[name].append(found[key].value)
            rows.append(
                _number(kind_name, group, key, lower, values["current"], values["target"], min_runs)
            )
    return rows


def _number(
    kind: str,
    group: str,
    key: str,
    lower: bool,
    current: list[float],
    target: list[float],
    min_runs: int,
) -> dict[str, Any]:
    now, then = _stats(current), _stats(target)
    change, past, noise = None, False, False
    if now and then:
        change, past = judge(now["median"], then["median"], lower, REGRESSION)
        noise = now["min"] <= then["max"] and then["min"] <= now["max"]
    return {
        "kind": kind,
        "group": group,
        "key": key,
        "lower_is_better": lower,
        "basis": "median",
        "current": now,
        "target": then,
        "change": change,
        "past_threshold": past,
        "within_noise": noise,
        "regression": past and not noise,
        "few_runs": any(side and side["n"] < min_runs for side in (now, then)),
    }


def _stats(values: list[float]) -> dict[str, Any] | None:
    if not values:
        return None
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def compare_outcomes(
    current: dict[str, dict[str, Any]],
    target: dict[str, dict[str, Any]],
    numbers: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """Per kind: both sides' outcomes and the deltas of the numbers both sides have."""
    rows = []
    for kind in sorted(current.keys() | target.keys()):
        now, then = current.get(kind), target.get(kind)
        mine = [row for row in numbers if row["kind"] == kind]
        for side, entry in (("current", now), ("target", then)):
            if entry is None:
                continue
            entry["numbers"] = {
                _label(row): row[side]["median"] for row in mine if row[side] is not None
            }
            entry["lower_is_better"] = sorted(
                _label(row) for row in mine if row["lower_is_better"] and row[side] is not None
            )
        deltas = []
        if now and then:
            deltas = [_delta(row) for row in mine if row["current"] and row["target"]]
            deltas += result_changes(kind, now["last_succeeded"], then["last_succeeded"])
        rows.append({"kind": kind, "current": now, "target": then, "deltas": deltas})
    return rows


def _delta(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "key": row["key"],
        "group": row["group"],
        "current": row["current"]["median"],
        "target": row["target"]["median"],
        "change": row["change"],
        "worse": row["regression"],
        "within_noise": row["within_noise"],
        "few_runs": row["few_runs"],
    }


def _label(row: dict[str, Any]) -> str:
    return f"{row['group']} · {row['key']}" if row["group"] else row["key"]


def result_changes(kind: str, current_id: int | None, target_id: int | None) -> list[dict]:
    """What the kind finds changed between the newest succeeded run on each side (an op
    matrix's regressions), beside the medians of the headline numbers."""
    if current_id is None or target_id is None:
        return []
    runs = Run.objects.in_bulk([current_id, target_id])
    return [
        {
            "key": row.name,
            "group": "",
            "current": row.baseline,
            "target": row.candidate,
            "change": row.change,
            "worse": row.regression,
            "basis": "newest",
        }
        for row in get_kind(kind).result_changes(runs[current_id], runs[target_id])
    ]


def other_changes(changes: dict[str, Any]) -> dict[str, Any]:
    """The differences between the two snapshots beyond the stack: other versions (numpy,
    the OS, the kernel) and the packages added, removed and changed."""
    stack_labels = {label for _, label in STACK_FIELDS} | {"NPUs", "GPUs"}
    packages = changes["packages"]

    def outside(names: dict[str, Any]) -> dict[str, Any]:
        return {
            name: value
            for name, value in names.items()
            if name.lower().replace("_", "-") not in STACK_PACKAGES
        }

    return {
        "versions": [item for item in changes["versions"] if item["name"] not in stack_labels],
        "packages": {
            "added": outside(packages["added"]),
            "removed": outside(packages["removed"]),
            "changed": outside(packages["changed"]),
        },
    }


def decide(result: Review) -> tuple[str, list[str]]:
    """No-go on a reason to stop; go only with evidence; caution in between."""
    compatibility = result.compatibility
    stop, doubt, notes = [], [], []
    # Said first, whatever the decision: a typo explains every other line.
    unknown = [describe(each) for each in result.unknown_versions]
    if compatibility["verdict"] == INCOMPATIBLE:
        stop.append("the target is incompatible: " + "; ".join(_incompatible(compatibility)))
    elif compatibility["verdict"] != OK:
        doubt.append("compatibility is not fully known: " + "; ".join(_unknown(compatibility)))
    if result.target is not None:
        errors = [f for f in result.target.data["findings"] if f.get("severity") == "error"]
        if errors:
            stop.append("the target has errors: " + "; ".join(f["title"] for f in errors))
    target_runs = [row for row in result.outcomes if row["target"]]
    for row in target_runs:
        last = row["target"]["last"]
        if last["status"] == Run.Status.FAILED and row["target"]["failed"]:
            stop.append(f"the last {row['kind']} run under the target failed (run #{last['id']})")
        doubt += [_worse(row["kind"], delta) for delta in row["deltas"] if delta["worse"]]
    succeeded = [row for row in target_runs if row["target"]["succeeded"]]
    if not succeeded and result.target is not None:
        doubt.append(
            "no run has succeeded under the target yet: run a smoke test on a host with its stack"
        )
    elif not succeeded:
        doubt.append(
            "a planned target has no runs: upgrade a staging host, then review its snapshot"
        )
    if result.same_stack:
        notes.append("the target has the current stack: both sides share the same runs as evidence")
    thin = _thin(result)
    if thin:
        notes.append(thin)
    if stop:
        return NO_GO, unknown + stop + doubt + notes
    if doubt or unknown:
        return CAUTION, unknown + doubt + notes
    kinds = ", ".join(row["kind"] for row in succeeded)
    return GO, [f"compatible, no error findings, {kinds} runs succeeded under the target", *notes]


def _thin(result: Review) -> str:
    """One line naming the kinds whose numbers rest on fewer runs than the setting asks."""
    few = sorted({row["kind"] for row in result.numbers if row["few_runs"]})
    if not few:
        return ""
    return (
        f"fewer than {result.min_runs} runs behind the numbers of {', '.join(few)}: "
        "treat their changes as a hint"
    )


def _worse(kind: str, delta: dict[str, Any]) -> str:
    where = f"{kind} {delta['group']}:" if delta.get("group") else kind
    if delta["change"] is None:  # a count, such as op regressions, has no percentage
        return f"{where} {delta['key']}: {delta['current']} → {delta['target']} under the target"
    return f"{where} {delta['key']} {abs(delta['change']):.0%} worse under the target"


def _listed(runs: list[Run], viewer: Any) -> list[dict[str, Any]]:
    if viewer is not None:
        seen = set(visible_runs(viewer).filter(pk__in=[run.pk for run in runs]).values_list("pk"))
        runs = [run for run in runs if (run.pk,) in seen]
    return [
        {
            "id": run.pk,
            "kind": run.kind,
            "name": run.name,
            "status": run.status,
            "cause": run.exit_cause,
            "cause_label": run.exit_cause_label,
            "reason": run.exit_reason[:300],
        }
        for run in runs
    ]


def _same_line(version: str | None, line: str) -> bool:
    """``3.11.4`` is on the ``3.11`` line (and on ``3.11.4``'s)."""
    if not version:
        return False
    parts, wanted = version.split("."), line.strip().split(".")
    return parts[: len(wanted)] == wanted


# The version-set verdicts of a compatibility: torch_npu's, MindSpore's.
STACK_CHECKS = ("python_stack", "mindspore_stack")


def _incompatible(compatibility: dict[str, Any]) -> list[str]:
    reasons = [
        f"{pair['pair']}: {pair['reason']}"
        for pair in compatibility.get("stack") or []
        if pair["verdict"] == INCOMPATIBLE
    ]
    for name in STACK_CHECKS:
        checked = compatibility.get(name) or {}
        reasons += [c["reason"] for c in checked.get("checks", []) if c["verdict"] == INCOMPATIBLE]
    return reasons


def _unknown(compatibility: dict[str, Any]) -> list[str]:
    reasons = [
        f"{pair['pair']}: {pair['reason']}"
        for pair in compatibility.get("stack") or []
        if pair["verdict"] != OK
    ]
    for name in STACK_CHECKS:
        checked = compatibility.get(name) or {}
        reasons += [c["reason"] for c in checked.get("checks", []) if c["verdict"] != OK]
    driver = compatibility.get("driver")
    if driver:
        reasons.append(driver["reason"])
    return reasons or ["nothing to check"]
