"""A short list of what is wrong with a profile, each with its evidence and its place.

Each finding is ``{kind, severity, title, evidence, ts_us, dur_us, lane}``: ``ts_us``
and ``dur_us`` are in the trace's own clock (the events' ``ts``), ``lane`` the trace's
``{pid, tid}`` or None for the whole device, so the timeline can open at it
(``?at=<ts_us>&span=<dur_us>``). The rules are deliberately few and their thresholds
are named here; a finding says what it measured, never only a verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from statistics import median
from typing import Any

from npulab.profiles.summary.kernels import COMPUTATION
from npulab.profiles.summary.sync import USER_LEVEL

IDLE_PCT = 20.0
SYNCS_PER_STEP = 1.0
SYNCS_WITHOUT_STEPS = 20
EXPOSED_COMMUNICATION_PCT = 30.0
FALLBACK_PCT = 5.0
DOMINANT_KERNEL_PCT = 30.0
SLOW_STEP_RATIO = 1.5
NPU_FREE_PCT = 20.0
NPU_AICPU_PCT = 10.0
MAX_FINDINGS = 12


def _finding(
    kind: str, severity: str, title: str, evidence: str, ts: Any, dur: Any, lane: Any = None
) -> dict:
    return {
        "kind": kind,
        "severity": severity,
        "title": title,
        "evidence": evidence,
        "ts_us": ts,
        "dur_us": dur,
        "lane": lane,
    }


def _ms(us: float) -> str:
    return f"{us / 1000:.1f} ms" if us >= 1000 else f"{us:.0f} µs"


def find(summary: dict[str, Any], extras: dict[str, Any]) -> list[dict[str, Any]]:
    """The findings of a summary; ``extras`` holds what the summary does not keep (gaps)."""
    out: list[dict[str, Any]] = []
    trace = summary["trace"]
    whole = (trace.get("start_us"), trace.get("duration_us"))
    steps = summary["steps"]
    items = steps.get("items") or []

    # The worst rank speaks for the others: one finding per kind, not one per rank.
    busy = [r for r in summary["ranks"] if r["kernel_us"]]
    if busy:
        rank = max(busy, key=lambda r: (_share(r["steps_idle_us"], r["steps_us"]), r["idle_pct"]))
        gap = extras.get("gaps", {}).get(rank["rank"])
        gap_ts, gap_dur = (gap["ts_us"], gap["dur_us"]) if gap else whole
        others = f" (the worst of {len(busy)} ranks)" if len(busy) > 1 else ""
        if rank["steps_us"] and _share(rank["steps_idle_us"], rank["steps_us"]) >= IDLE_PCT:
            pct = _share(rank["steps_idle_us"], rank["steps_us"])
            out.append(
                _finding(
                    "idle",
                    "warning",
                    f"{pct:.0f} % of step time is idle device time{_boundary(items, gap)}",
                    f"rank {rank['rank']}{others}: the device ran nothing for "
                    f"{_ms(rank['steps_idle_us'])} of {_ms(rank['steps_us'])} in {rank['steps']} "
                    f"steps; the longest gap is {_ms(gap_dur or 0)}",
                    gap_ts,
                    gap_dur,
                )
            )
        elif rank["idle_pct"] >= IDLE_PCT:
            out.append(
                _finding(
                    "idle",
                    "warning",
                    f"{rank['idle_pct']:.0f} % of device time is idle",
                    f"rank {rank['rank']}{others}: {_ms(rank['idle_us'])} idle of "
                    f"{_ms(rank['kernel_us'])} between "
                    f"the first and last kernel; the longest gap is {_ms(gap_dur or 0)}",
                    gap_ts,
                    gap_dur,
                )
            )

        def exposed(r: dict[str, Any]) -> float:
            return next((t["us"] for t in r["kernel_types"] if t["type"] == "COMMUNICATION"), 0.0)

        rank = max(busy, key=lambda r: _share(exposed(r), r["kernel_us"]))
        if _share(exposed(rank), rank["kernel_us"]) >= EXPOSED_COMMUNICATION_PCT:
            out.append(
                _finding(
                    "communication",
                    "warning",
                    f"{_share(exposed(rank), rank['kernel_us']):.0f} % of device time is "
                    "communication not "
                    "overlapped with computation",
                    f"rank {rank['rank']}{others}: {_ms(exposed(rank))} of communication "
                    "kernels with no "
                    "computation running",
                    *whole,
                )
            )

    all_steps = sum(r.get("profiler_steps") or 0 for r in summary["ranks"])
    ranks = len(summary["ranks"])
    # On a CPU-only run, aten::item is a read of host memory, not a wait for a device.
    device_run = bool(trace.get("device_events"))
    for row in summary["syncs"] if device_run else []:
        if row["name"] not in USER_LEVEL:
            continue
        per_step = row["per_step"]
        if (per_step is not None and per_step >= SYNCS_PER_STEP) or (
            per_step is None and row["count"] >= SYNCS_WITHOUT_STEPS
        ):
            if per_step is None:
                rate = f"{row['count']} times"
            else:
                rate = "once per step" if per_step == 1 else f"{per_step:g} times per step"
            out.append(
                _finding(
                    "sync",
                    "warning",
                    f"`{row['name']}` forces a host-device sync {rate}",
                    f"{row['count']} calls{f' in {all_steps} steps' if all_steps else ''}"
                    f"{f' of {ranks} ranks' if ranks > 1 else ''}, {_ms(row['us'])} in all, "
                    f"the longest {_ms(row['max_us'])}",
                    row["ts_us"],
                    row["dur_us"],
                    row["lane"],
                )
            )

    fallbacks = summary["fallbacks"]
    if fallbacks:
        total = sum(f["us"] for f in fallbacks)
        base = sum(s["dur_us"] for s in items) or trace.get("duration_us") or 0
        if base and 100 * total / base >= FALLBACK_PCT:
            top = fallbacks[0]
            names = ", ".join(f"`{f['name']}`" for f in fallbacks[:3])
            out.append(
                _finding(
                    "fallback",
                    "warning",
                    f"{100 * total / base:.0f} % of {'step' if items else 'the'} time goes to "
                    "ops that ran on the CPU",
                    f"{names} launched no device work ({_ms(total)} in all; "
                    f"`{top['name']}` {top['count']} times)",
                    top["ts_us"],
                    top["dur_us"],
                    top["lane"],
                )
            )

    # Of computation: a collective's or a wait's share is the communication finding's.
    kernels = [k for k in summary["top_kernels"] if k.get("type") == COMPUTATION]
    if kernels and kernels[0]["pct"] >= DOMINANT_KERNEL_PCT:
        k = kernels[0]
        out.append(
            _finding(
                "kernel",
                "info",
                f"one kernel takes {k['pct']:.0f} % of kernel time",
                f"`{k['name'][:120]}`: {k['count']} launches, {_ms(k['us'])} in all, "
                f"{_ms(k['mean_us'])} each",
                *whole,
            )
        )

    durations = [s["dur_us"] for s in items]
    if len(durations) >= 3:
        mid = median(durations)
        slow = max(items, key=lambda s: s["dur_us"])
        if mid and slow["dur_us"] >= SLOW_STEP_RATIO * mid:
            out.append(
                _finding(
                    "step",
                    "info",
                    f"step {slow['step']} took {slow['dur_us'] / mid:.1f}× the median step",
                    f"{_ms(slow['dur_us'])} against a median of {_ms(mid)} over {len(items)} steps",
                    slow["ts_us"],
                    slow["dur_us"],
                    slow.get("lane"),
                )
            )

    npu = summary.get("npu") or {}
    # One folder's views, or each rank's of a folder of ranks: the worst rank speaks.
    views = npu.get("ranks") or ([npu] if npu else [])
    st, folder = _worst(views, _step_trace, "free_pct")
    already_idle = any(f["kind"] == "idle" for f in out)
    if st is not None and st["free_pct"] >= NPU_FREE_PCT and not already_idle:
        out.append(
            _finding(
                "idle",
                "warning",
                f"{st['free_pct']:.0f} % of step time is free: the NPU waits on the host",
                f"{folder}step_trace_time.csv: {_ms(st['totals']['free_us'])} free in "
                f"{st['count']} steps",
                *whole,
            )
        )
    st, folder = _worst(views, _step_trace, "communication_pct")
    # The trace's own breakdown says it already where the trace has the device's lanes.
    already_exposed = any(f["kind"] == "communication" for f in out)
    if (
        st is not None
        and st["communication_pct"] >= EXPOSED_COMMUNICATION_PCT
        and not already_exposed
    ):
        out.append(
            _finding(
                "communication",
                "warning",
                f"{st['communication_pct']:.0f} % of step time is communication not overlapped",
                f"{folder}step_trace_time.csv: "
                f"{_ms(st['totals']['communication_not_overlapped_us'])} in {st['count']} steps",
                *whole,
            )
        )
    aicpu, folder = _worst(views, _aicpu, "pct")
    if aicpu is not None and aicpu["pct"] >= NPU_AICPU_PCT:
        out.append(
            _finding(
                "aicpu",
                "warning",
                f"AI CPU ops take {aicpu['pct']:.0f} % of device time",
                f"{folder}kernel_details.csv: {aicpu['count']} AI CPU tasks, "
                f"{_ms(aicpu['us'])}; these ops have no AI Core kernel for their dtype or shape",
                *whole,
            )
        )
    return out[:MAX_FINDINGS]


def _step_trace(view: dict[str, Any]) -> dict[str, Any] | None:
    return view.get("step_trace_time")


def _aicpu(view: dict[str, Any]) -> dict[str, Any] | None:
    cores = (view.get("kernel_details") or {}).get("by_core", [])
    return next((c for c in cores if c["core"] == "AI CPU"), None)


def _worst(
    views: list[dict[str, Any]], part: Callable[[dict[str, Any]], dict[str, Any] | None], key: str
) -> tuple[dict[str, Any] | None, str]:
    """``part`` of the view where its ``key`` is largest, and that view's folder as the
    evidence's prefix where there are several ranks' ("rank1_ascend_pt/"); (None, "")
    where no view has it."""
    found: list[tuple[float, dict[str, Any], str]] = []
    for view in views:
        value = part(view)
        if value is not None and value.get(key) is not None:
            found.append((value[key], value, f"{view.get('folder', '')}/"))
    if not found:
        return None, ""
    _, value, folder = max(found, key=lambda item: item[0])
    return value, folder if len(views) > 1 else ""


def _share(part: float, whole: float) -> float:
    return 100 * part / whole if whole else 0.0


def _boundary(items: list[dict[str, Any]], gap: dict[str, Any] | None) -> str:
    """ ": between steps (the data loader)" when the longest gap spans a step start."""
    if not gap:
        return ""
    g0, g1 = gap["ts_us"], gap["ts_us"] + gap["dur_us"]
    for step in items[1:]:
        if g0 <= step["ts_us"] <= g1:
            return " between steps: the data loader or host work before the first kernel"
    return ""
