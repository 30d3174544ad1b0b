"""Reading a coverage run: its progress, its op × dtype matrix and one cell's detail."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count, Q
from django.utils import timezone

from npulab.coverage.models import CoveragePlan, OpResult
from npulab.runs.models import Run
from workers.kinds.coverage import DTYPES, FORWARD, PASS, STATUSES


@dataclass
class Progress:
    """How far a coverage run is: results in, results announced, counts per status, ETA."""

    done: int
    total: int | None
    counts: dict[str, int]
    elapsed_s: float | None
    eta_s: float | None

    @property
    def percent(self) -> float | None:
        return 100.0 * self.done / self.total if self.total else None

    @property
    def passed(self) -> int:
        return self.counts.get(PASS, 0)

    @property
    def bars(self) -> list[tuple[str, int, float]]:
        """(status, count, % of the total) per status present, for a stacked progress bar."""
        scale = self.total or self.done or 1
        return [
            (status, self.counts[status], 100.0 * self.counts[status] / scale)
            for status in STATUSES
            if self.counts.get(status)
        ]


def progress(run: Run, now: datetime | None = None) -> Progress:
    counts = dict(
        OpResult.objects.filter(run=run)
        .values_list("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    done = sum(counts.values())
    plan = CoveragePlan.objects.filter(run=run).only("total").first()
    total = max(plan.total, done) if plan else None
    elapsed = eta = None
    if run.started_at:
        end = run.finished_at or now or timezone.now()
        elapsed = max(0.0, (end - run.started_at).total_seconds())
        if run.is_active and done and total:
            eta = elapsed / done * (total - done)
    return Progress(
        done, total, {status: counts.get(status, 0) for status in STATUSES}, elapsed, eta
    )


@dataclass
class MatrixRow:
    op: str
    variant: str
    family: str
    # One status per column of Matrix.dtypes; None where the pair was not tested.
    cells: list[str | None]

    @property
    def label(self) -> str:
        return f"{self.op}.{self.variant}" if self.variant else self.op


@dataclass
class DtypeRate:
    dtype: str
    passed: int
    tested: int

    @property
    def rate(self) -> float | None:
        return self.passed / self.tested if self.tested else None

    @property
    def percent(self) -> float | None:
        return None if self.rate is None else 100.0 * self.rate


@dataclass
class Matrix:
    phase: str
    dtypes: list[str]
    rows: list[MatrixRow]
    # Over every result of the phase, whatever the filters.
    rates: list[DtypeRate]
    families: list[str]
    ops_total: int
    phases: list[str] = field(default_factory=list)


def dtype_order(dtypes: set[str]) -> list[str]:
    known = [dtype for dtype in DTYPES if dtype in dtypes]
    return known + sorted(dtypes - set(known))


def dtype_rates(run: Run, phase: str = FORWARD) -> list[DtypeRate]:
    """Each dtype's pass rate over every result of one pass, in the matrix's column order."""
    counts = (
        OpResult.objects.filter(run=run, phase=phase)
        .values_list("dtype")
        .annotate(tested=Count("id"), passed=Count("id", filter=Q(status=PASS)))
        .values_list("dtype", "passed", "tested")
    )
    by_dtype = {dtype: (passed, tested) for dtype, passed, tested in counts}
    return [DtypeRate(dtype, *by_dtype[dtype]) for dtype in dtype_order(set(by_dtype))]


def matrix(
    run: Run, phase: str = FORWARD, status: str = "", query: str = "", family: str = ""
) -> Matrix:
    """The run's results of one pass as rows of ops, filtered by status, name and family.

    ``query`` is a case-insensitive substring, or an fnmatch pattern when it has one of ``*?[``.
    A status filter keeps the ops with at least one cell of that status.
    """
    results = OpResult.objects.filter(run=run)
    phases = sorted(set(results.values_list("phase", flat=True).distinct()))
    cells = list(
        results.filter(phase=phase)
        .order_by("op", "variant")
        .values_list("op", "variant", "family", "dtype", "status")
    )
    dtypes = dtype_order({cell[3] for cell in cells})
    column = {dtype: index for index, dtype in enumerate(dtypes)}
    by_op: dict[tuple[str, str], MatrixRow] = {}
    for op, variant, op_family, dtype, cell_status in cells:
        row = by_op.get((op, variant))
        if row is None:
            row = by_op[op, variant] = MatrixRow(op, variant, op_family, [None] * len(dtypes))
        row.cells[column[dtype]] = cell_status
    rows = list(by_op.values())
    families = sorted({row.family for row in rows})
    if family:
        rows = [row for row in rows if row.family == family]
    if query:
        rows = [row for row in rows if _matches(row.label, query)]
    if status:
        rows = [row for row in rows if status in row.cells]
    return Matrix(phase, dtypes, rows, dtype_rates(run, phase), families, len(by_op), phases)


def _matches(label: str, query: str) -> bool:
    label, query = label.lower(), query.lower()
    if any(char in query for char in "*?["):
        return fnmatch.fnmatchcase(label, query)
    return query in label


def cell(run: Run, op: str, variant: str, dtype: str) -> list[OpResult]:
    """Every pass of one op × variant × dtype (forward first)."""
    found = OpResult.objects.filter(run=run, op=op, variant=variant, dtype=dtype)
    return sorted(found, key=lambda result: result.phase != FORWARD)
