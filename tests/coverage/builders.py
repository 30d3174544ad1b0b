"""Coverage runs with results, stored through the real ingestion path."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from npulab.runs.events import store_events
from npulab.runs.models import Run
from tests.factories import RunFactory
from workers.contract import exits
from workers.contract.kinds import validate
from workers.kinds.coverage import COVERAGE_PLAN, FORWARD, OP_RESULT, PASS


def coverage_run(status: str = Run.Status.SUCCEEDED, **fields: Any) -> Run:
    spec = validate({"kind": "coverage", "device_type": "cpu", **fields.pop("spec", {})})
    finished = status not in Run.ACTIVE
    defaults = {
        "started_at": timezone.now(),
        "finished_at": timezone.now() if finished else None,
        "exit_cause": exits.COMPLETED if status == Run.Status.SUCCEEDED else "",
        "result": {"status": status, "summary": {}} if finished else {},
    }
    return RunFactory(spec=spec, status=status, **{**defaults, **fields})


def op_result(
    op: str, dtype: str, status: str = PASS, variant: str = "", phase: str = FORWARD, **extra: Any
) -> dict[str, Any]:
    event = {
        "type": OP_RESULT,
        "time": 1.0,
        "op": op,
        "variant": variant,
        "dtype": dtype,
        "pass": phase,
        "status": status,
        "error": None if status == PASS else f"{status} in {op}",
        "max_abs_err": None,
        "max_rel_err": None,
        "seconds": 0.01,
        "samples": 1,
    }
    event.update(extra)
    return event


def plan(total: int, **extra: Any) -> dict[str, Any]:
    return {"type": COVERAGE_PLAN, "time": 0.5, "op_set": "opinfo", "total": total, **extra}


def ingest(run: Run, events: list[dict[str, Any]]) -> None:
    store_events(run, events, timezone.now())


def with_results(cells: dict[tuple[str, str], str], **fields: Any) -> Run:
    """A finished coverage run whose (op, dtype) cells have these statuses."""
    run = coverage_run(**fields)
    ingest(run, [plan(len(cells))] + [op_result(op, dtype, s) for (op, dtype), s in cells.items()])
    return run
