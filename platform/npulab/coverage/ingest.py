"""The coverage kind's events: its plan and each result go to its own tables, in bulk."""

from __future__ import annotations

from typing import Any

from npulab.core.text import storable, storable_json
from npulab.coverage.models import (
    MAX_ERROR_CHARS,
    MAX_OP_CHARS,
    CoveragePlan,
    OpResult,
    op_family,
)
from npulab.runs.events import Batch, MalformedEvent
from npulab.runs.models import Run
from workers.kinds.coverage import FORWARD, PASSES, STATUSES

# A model's op list is tens to hundreds of ops; a runaway one is cut, not stored whole.
MAX_PLAN_OPS = 5000
_PENDING = "coverage.op_results"


def on_plan(batch: Batch, data: dict[str, Any]) -> bool:
    ops = data.get("ops") or []
    CoveragePlan.objects.update_or_create(
        run=batch.run,
        defaults={
            "op_set": storable(str(data.get("op_set", "")))[:20],
            "total": max(0, min(int(data["total"]), 2**31 - 1)),
            "ops": storable_json([op for op in ops[:MAX_PLAN_OPS] if isinstance(op, dict)]),
        },
    )
    return True


def on_op_result(batch: Batch, data: dict[str, Any]) -> bool:
    status = data["status"]
    if status not in STATUSES:
        raise MalformedEvent("op_result.status must be one of " + ", ".join(STATUSES))
    phase = data.get("pass", FORWARD)
    if phase not in PASSES:
        raise MalformedEvent("op_result.pass must be one of " + ", ".join(PASSES))
    op = storable(data["op"])
    if not op or len(op) > MAX_OP_CHARS:
        raise MalformedEvent(f"op_result.op must be 1 to {MAX_OP_CHARS} characters")
    samples = data.get("samples", 1)
    batch.pending(_PENDING, _insert).append(
        OpResult(
            run=batch.run,
            op=op,
            variant=storable(str(data.get("variant", "")))[:100],
            dtype=storable(data["dtype"])[:20],
            phase=phase,
            family=op_family(op)[:100],
            status=status,
            error=storable(data.get("error") or "", MAX_ERROR_CHARS),
            max_abs_err=data.get("max_abs_err"),
            max_rel_err=data.get("max_rel_err"),
            seconds=float(data.get("seconds", 0.0)),
            samples=max(0, min(samples, 2**31 - 1)),
            detail=storable_json(data.get("detail") or {}),
        )
    )
    return True


def _insert(run: Run, rows: list[OpResult]) -> None:
    # A batch delivered twice (a forwarder resync) must not fail on rows already in.
    OpResult.objects.bulk_create(rows, batch_size=1000, ignore_conflicts=True)
