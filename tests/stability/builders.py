"""Stability runs with intervals, stored through the real ingestion path."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from npulab.runs.events import store_events
from npulab.runs.models import Run
from tests.factories import RunFactory
from workers.contract import exits
from workers.contract.kinds import validate
from workers.kinds.stability import INTERVAL, MATCH


def stability_run(
    status: str = Run.Status.SUCCEEDED, summary: dict[str, Any] | None = None, **fields: Any
) -> Run:
    spec = validate(
        {
            "kind": "stability",
            "device_type": "cpu",
            "duration_s": 4,
            "interval_s": 1,
            **fields.pop("spec", {}),
        }
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


def interval(number: int, device: int = 0, consistency: str = MATCH, **extra: Any) -> dict:
    event = {
        "type": INTERVAL,
        "time": 100.0 + number,
        "interval": number,
        "device": device,
        "seconds": 1.0,
        "iterations": 100,
        "throughput": 2.0,
        "unit": "TFLOP/s",
        "consistency": consistency,
        "max_rel_err": 0.0,
        "health": "OK",
        "telemetry": {"temperature_c": 60.0 + number, "power_w": 300.0},
        "error": "",
    }
    event.update(extra)
    return event


def ingest(run: Run, events: list[dict[str, Any]]) -> None:
    store_events(run, events, timezone.now())


def verdict(name: str, *reasons: str, bad: tuple[int, ...] = (), **numbers: Any) -> dict:
    """A runner's summary with this verdict."""
    return {
        "verdict": name,
        "reasons": list(reasons),
        "bad_devices": [{"device": d, "reason": reasons[0]} for d in bad],
        "intervals": 4,
        "unit": "TFLOP/s",
        "mismatches": 0,
        **numbers,
    }
