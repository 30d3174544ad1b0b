"""Two coverage runs cell by cell: what regressed, what was fixed, what is new.

The baseline is typically the run on a known-good stack, the candidate the
run after upgrading CANN (or torch, or torch_npu). A cell is an op × variant
× dtype × pass. ``regressions`` is what a pipeline gates on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import QuerySet

from npulab.coverage.models import OpResult
from npulab.runs.models import Run
from workers.kinds.coverage import WORKING

# Groups of a comparison, in the order pages and the API list them.
REGRESSIONS = "regressions"  # passed in the baseline, does not in the candidate
FIXES = "fixes"  # did not pass in the baseline, passes in the candidate
NEW = "new"  # not tested in the baseline
CHANGED = "changed"  # failed in both, differently (mismatch became crash)
UNCHANGED = "unchanged"
MISSING = "missing"  # tested in the baseline, not in the candidate
GROUPS = (REGRESSIONS, FIXES, NEW, CHANGED, UNCHANGED, MISSING)

_FIELDS = ("op", "variant", "dtype", "phase", "status", "error", "max_abs_err", "max_rel_err")
_FIELDS_WITH_TIME = (*_FIELDS, "seconds")


@dataclass
class CellResult:
    """One side of a compared cell."""

    status: str
    error: str
    max_abs_err: float | None
    max_rel_err: float | None


@dataclass
class CellChange:
    op: str
    variant: str
    dtype: str
    phase: str
    baseline: CellResult | None
    candidate: CellResult | None
    # The candidate's time, for a JUnit testcase.
    seconds: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.op}.{self.variant}" if self.variant else self.op


@dataclass
class CoverageComparison:
    baseline: Run
    candidate: Run
    groups: dict[str, list[CellChange]] = field(default_factory=dict)

    @property
    def counts(self) -> dict[str, int]:
        return {group: len(self.groups.get(group, [])) for group in GROUPS}

    @property
    def regressions(self) -> int:
        return len(self.groups.get(REGRESSIONS, []))


def _cells(run: Run, with_time: bool) -> dict[tuple[str, str, str, str], tuple]:
    rows = OpResult.objects.filter(run=run).values_list(
        *(_FIELDS_WITH_TIME if with_time else _FIELDS)
    )
    return {row[:4]: row[4:] for row in rows}


def group_of(baseline: str | None, candidate: str | None) -> str:
    if baseline is None:
        return NEW
    if candidate is None:
        return MISSING
    # "works, unclaimed" works: losing it is a regression, gaining it a fix, and a pass
    # that becomes one (or back) a change, never either.
    if baseline in WORKING and candidate not in WORKING:
        return REGRESSIONS
    if baseline not in WORKING and candidate in WORKING:
        return FIXES
    return UNCHANGED if baseline == candidate else CHANGED


def compare(baseline: Run, candidate: Run) -> CoverageComparison:
    before, after = _cells(baseline, False), _cells(candidate, True)
    groups: dict[str, list[CellChange]] = {group: [] for group in GROUPS}
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key), after.get(key)
        change = CellChange(
            *key,
            baseline=CellResult(*old) if old else None,
            candidate=CellResult(*new[:4]) if new else None,
            seconds=new[4] if new else 0.0,
        )
        groups[group_of(old[0] if old else None, new[0] if new else None)].append(change)
    return CoverageComparison(baseline, candidate, groups)


# Baselines considered when a comparison asks for the known-good one.
_BASELINE_CANDIDATES = 200


def known_good_baseline(candidate: Run, runs: QuerySet[Run] | None = None) -> Run | None:
    """The newest succeeded coverage run on a known-good snapshot, like the candidate.

    Like it: the same device type and op set; a run on the candidate's own host
    is preferred to one on another host. ``runs``: those it may be (every run by default).
    """
    runs = (
        (Run.objects.all() if runs is None else runs)
        .filter(
            kind=candidate.kind,
            status=Run.Status.SUCCEEDED,
            device_type=candidate.device_type,
            snapshot__known_good_at__isnull=False,
        )
        .exclude(pk=candidate.pk)
        .order_by("-finished_at", "-id")
    )
    same_op_set = [
        run
        for run in runs[:_BASELINE_CANDIDATES]
        if run.spec.get("op_set") == candidate.spec.get("op_set")
    ]
    same_host = [run for run in same_op_set if run.host_id == candidate.host_id]
    return (same_host or same_op_set or [None])[0]


KNOWN_GOOD = "known-good"
_MAX_ID = 2**63 - 1


class BaselineInvalid(ValueError):
    """``baseline`` is neither a run id nor ``known-good``."""


class NoBaseline(LookupError):
    """No run answers to the ``baseline`` asked for; the message says why."""


def resolve_baseline(candidate: Run, value: str, runs: QuerySet[Run] | None = None) -> Run:
    """The run ``value`` names: a coverage run's id, or ``known-good`` (also the default).

    ``runs``: the runs it may be, e.g. those the asking user may see (every run by default).
    """
    runs = Run.objects.all() if runs is None else runs
    value = value.strip()
    if value in ("", KNOWN_GOOD):
        found = known_good_baseline(candidate, runs)
        if found is None:
            raise NoBaseline(
                f"no succeeded {candidate.device_type} coverage run of op set "
                f"{candidate.spec.get('op_set')!r} on a known-good snapshot: mark a snapshot "
                "known-good, or give a run id"
            )
        return found
    if not value.isdigit() or not 0 < int(value) <= _MAX_ID:
        raise BaselineInvalid(f"{value[:40]!r} is not a run id nor {KNOWN_GOOD!r}")
    found = runs.select_related("host", "snapshot").filter(pk=int(value)).first()
    if found is None or found.kind != candidate.kind:
        raise NoBaseline(f"no coverage run #{int(value)}")
    return found
