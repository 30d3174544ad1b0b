"""A stability run's verdict as the platform sees it: the runner's, or a fail when its
process died under load (the runner could not say so itself)."""

from __future__ import annotations

from typing import Any

from npulab.runs.models import Run
from workers.contract import exits
from workers.kinds.stability import FAIL, PASS, VERDICTS, WARN

RANK = {PASS: 0, WARN: 1, FAIL: 2}
MAX_REASONS = 50
_ENDED_BY_THE_MACHINE = (Run.Status.FAILED,)


def run_verdict(run: Run) -> dict[str, Any] | None:
    """``verdict``, ``reasons`` and ``bad_devices`` (each with the host's ``index``), or None
    while the run is active, or when it ended without one (cancelled, timed out, lost)."""
    if run.is_active:
        return None
    summary = (run.result or {}).get("summary") or {}
    indices = list(run.device_indices or [])
    if summary.get("verdict") in VERDICTS:
        reasons = [str(reason) for reason in summary.get("reasons") or []][:MAX_REASONS]
        bad = []
        for entry in summary.get("bad_devices") or []:
            device = entry.get("device") if isinstance(entry, dict) else None
            if isinstance(device, int) and not isinstance(device, bool) and device >= 0:
                bad.append(_bad(device, indices, str(entry.get("reason", ""))))
        return {"verdict": summary["verdict"], "reasons": reasons, "bad_devices": bad}
    if run.status in _ENDED_BY_THE_MACHINE and run.exit_cause == exits.PROCESS_EXIT:
        reason = f"the run's process died under load: {run.exit_reason or 'no reason given'}"
        # A user's own function that crashes is the user's; a built-in workload's crash is
        # the device stack's, and the run cannot tell which of its devices.
        built_in = ":" not in str(run.spec.get("workload", ""))
        devices = range(run.devices) if built_in else ()
        return {
            "verdict": FAIL,
            "reasons": [reason],
            "bad_devices": [_bad(device, indices, reason) for device in devices],
        }
    return None


def _bad(device: int, indices: list[int], reason: str) -> dict[str, Any]:
    index = indices[device] if device < len(indices) else device
    return {"device": device, "index": int(index), "reason": reason}
