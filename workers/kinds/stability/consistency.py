"""The consistency check: the same fixed-seed computation must give the same result.

A device's result is compared with its own first interval's (bitwise equal:
``match``; within the tolerance: ``close``, for kernels that are allowed to
differ run to run; else ``mismatch``), and, with several devices, with the
result of the same interval on the first device whose own result held. A NaN
where the reference has a number is a mismatch. Torch is passed in, never
imported here at module level.
"""

from __future__ import annotations

from typing import Any

from workers.kinds.stability import CLOSE, MATCH, MISMATCH

# The tolerance of a result that is not bitwise equal, by dtype (the spec's rtol overrides).
DEFAULT_RTOL = {"float64": 1e-12, "float32": 1e-5, "float16": 1e-2, "bfloat16": 1e-2}


def rtol_for(dtype_name: str, rtol: float) -> float:
    return rtol if rtol > 0 else DEFAULT_RTOL.get(dtype_name, 1e-5)


def compare(torch: Any, reference: Any, result: Any, rtol: float) -> tuple[str, float | None]:
    """(outcome, max relative error) of ``result`` against ``reference`` (CPU tensors)."""
    if reference.shape != result.shape:
        return MISMATCH, None
    if torch.equal(reference, result):
        return MATCH, 0.0
    ref = reference.double()
    diff = (result.double() - ref).abs()
    scale = float(ref.abs().max()) or 1.0
    error = float(diff.max()) / scale
    if error != error:  # NaN: a result with NaN where the reference has none
        return MISMATCH, None
    return (CLOSE if error <= rtol else MISMATCH), error


def perturb(result: Any) -> Any:
    """``result`` with one element changed: what one flipped bit in memory would do."""
    out = result.clone()
    flat = out.view(-1)
    flat[flat.numel() // 2] += 1.0 + abs(float(flat[flat.numel() // 2]))
    return out


def check_interval(
    torch: Any,
    references: dict[int, Any],
    results: dict[int, Any],
    rtol: float,
) -> dict[int, dict[str, Any]]:
    """Each device's outcome this interval: against its reference, then against device 0.

    ``references`` holds each device's first result (filled here on the first call);
    ``results`` this interval's results, by device. A device disagreeing with the
    others is named as the mismatch, with what it disagreed with.
    """
    outcomes: dict[int, dict[str, Any]] = {}
    for device, result in sorted(results.items()):
        if device not in references:
            references[device] = result
        outcome, error = compare(torch, references[device], result, rtol)
        detail = "" if outcome != MISMATCH else "differs from its first interval's result"
        outcomes[device] = {"consistency": outcome, "max_rel_err": error, "detail": detail}
    # The others are held against the first device that still agrees with itself: a device
    # whose own result changed must not make the healthy ones look corrupt.
    healthy = [device for device in sorted(results) if outcomes[device]["consistency"] != MISMATCH]
    if len(results) > 1 and healthy:
        first = healthy[0]
        for device in sorted(results):
            if device == first:
                continue
            outcome, error = compare(torch, results[first], results[device], rtol)
            mine = outcomes[device]
            if outcome == MISMATCH and mine["consistency"] != MISMATCH:
                mine.update(
                    consistency=MISMATCH,
                    max_rel_err=error,
                    detail=f"disagrees with device {first}",
                )
            elif outcome == CLOSE and mine["consistency"] == MATCH:
                mine.update(consistency=CLOSE, max_rel_err=error)
    return outcomes


def mismatched(outcomes: dict[int, dict[str, Any]]) -> list[int]:
    return [
        device for device, found in sorted(outcomes.items()) if found["consistency"] == MISMATCH
    ]
