"""Parity runs with layers, stored through the real ingestion path."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from npulab.runs.events import store_events
from npulab.runs.models import Run
from tests.factories import RunFactory
from workers.contract import exits
from workers.contract.kinds import validate
from workers.kinds.parity import LAYER


def parity_run(
    status: str = Run.Status.SUCCEEDED, summary: dict[str, Any] | None = None, **fields: Any
) -> Run:
    spec = validate(
        {"kind": "parity", "device_type": "cpu", "entry": "builtin:mlp", **fields.pop("spec", {})}
    )
    finished = status not in Run.ACTIVE
    result_status = exits.SUCCEEDED if status == Run.Status.SUCCEEDED else exits.FAILED
    defaults = {
        "started_at": timezone.now(),
        "finished_at": timezone.now() if finished else None,
        "exit_cause": exits.COMPLETED if status == Run.Status.SUCCEEDED else "",
        "result": {"status": result_status, "summary": summary or {}} if finished else {},
    }
    return RunFactory(spec=spec, status=status, **{**defaults, **fields})


def layer(index: int, cosine: float | None = 1.0, broken: tuple = (), **extra: Any) -> dict:
    return {
        "type": LAYER,
        "time": 100.0 + index,
        "index": index,
        "name": f"Functional.linear.{index}.forward.output.0",
        "dtype_a": "torch.float32",
        "dtype_b": "torch.bfloat16",
        "shape_a": "[8, 16]",
        "shape_b": "[8, 16]",
        "cosine": cosine,
        "euc_dist": 0.0,
        "max_abs_err": 0.001,
        "max_rel_err": 0.01,
        "one_thousandth_ratio": 0.5,
        "five_thousandth_ratio": 0.9,
        "broken": list(broken),
        "nan": False,
        "stack": [f"/srv/model.py:{20 + index} in forward: x = self.layer{index}(x)"],
        **extra,
    }


def ingest(run: Run, events: list[dict]) -> None:
    store_events(run, events, timezone.now())
