"""A profile's summary, computed in one streaming pass per trace file.

``summarise(path)`` reads a Chrome/Kineto trace (``.json`` or ``.json.gz``), a torch_npu
``*_ascend_pt`` folder, or a folder of either (one per rank) and returns a JSON-ready
dict whose keys are documented in docs/profiles.md ("Summary"):

``trace`` (what was read), ``ranks`` (HTA's temporal breakdown per rank), ``kernel_types``
(HTA's kernel-type breakdown over all ranks), ``top_kernels``, ``top_ops``, ``steps``,
``syncs``, ``fallbacks``, ``npu`` (torch_npu's own CSV views, or None) and ``findings``.

Pure Python with no Django: the control task (``npulab.profiles``) and the
``profile_summary`` command call the same function. Memory does not grow with the trace:
events are decoded one at a time (``trace``) and everything kept is bounded by the
number of distinct names, threads and steps, or spilled to a temporary file (``breakdown``).
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from pathlib import Path
from statistics import median
from typing import Any

from npulab.profiles.summary import findings as _findings
from npulab.profiles.summary.breakdown import RankBreakdown, combine_types
from npulab.profiles.summary.fallbacks import Fallbacks
from npulab.profiles.summary.kernels import (
    ASCEND_DEVICE_PROCESSES,
    ASCEND_HCCL_PROCESS,
    BITS,
    ORDER,
    as_int,
    is_ascend_collective,
)
from npulab.profiles.summary.npu import npu_views
from npulab.profiles.summary.occurrences import lane_dict
from npulab.profiles.summary.ops import LAUNCH, OP, OpStats, is_launch, shapes_of, top_kernels
from npulab.profiles.summary.sync import Syncs, sync_name
from npulab.profiles.summary.trace import Trace, TraceError, ascend_output, iter_events, trace_files

SUMMARY_VERSION = 2
MAX_STEPS = 500
MAX_PROCESSES = 1000
_FLOW_CATS = ("ac2g", "async_npu", "async_gpu")
# "Operator": PyTorch 1.8 and 1.9's Kineto.
_CPU_OP_CATS = ("cpu_op", "Operator")
_GPU_ANNOTATION = "gpu_user_annotation"
_STEP = re.compile(r"ProfilerStep\s*#\s*(\d+)")

__all__ = ["SUMMARY_VERSION", "TraceError", "iter_events", "summarise", "trace_files"]


_KEY_TYPES = (int, str, type(None))


def _key(value: Any) -> str:
    # A pid, tid or category that is not a plain value (a hostile trace's list or object).
    return str(value)[:100]


class _RankPass:
    """Everything one trace file (one rank) contributes, fed event by event."""

    def __init__(self, path: Path, index: int, tmpdir: str) -> None:
        self.path = path
        self.index = index
        self.trace = Trace(path)
        self.breakdown = RankBreakdown(tmpdir)
        self.fallbacks = Fallbacks()
        self.ops = OpStats(on_close=self.fallbacks, tmpdir=tmpdir)
        self.syncs = Syncs()
        self.steps: list[dict[str, Any]] = []
        self.step_count = 0
        self.step_total = 0.0
        self.processes: dict[Any, str] = {}
        self.device_pids: set[Any] = set()
        self.hccl_pids: set[Any] = set()
        self.events = 0
        self.t_min = math.inf
        self.t_max = -math.inf
        self.device_events = 0

    def read(self) -> None:
        bd = self.breakdown
        ops_add = self.ops.add
        syncs_add = self.syncs.add
        device_pids = self.device_pids
        hccl_pids = self.hccl_pids
        t_min, t_max = math.inf, -math.inf
        n = 0
        for ev in self.trace.events():
            n += 1
            ph = ev.get("ph")
            if ph == "M":
                self._metadata(ev)
                continue
            ts = ev.get("ts")
            if not isinstance(ts, (int, float)):
                continue
            pid = ev.get("pid")
            if pid.__class__ not in _KEY_TYPES:
                pid = _key(pid)
            tid = ev.get("tid")
            if tid.__class__ not in _KEY_TYPES:
                tid = _key(tid)
            cat = ev.get("cat")
            if cat.__class__ is not str:
                cat = None if cat is None else _key(cat)
            if ph == "s":
                if cat in _FLOW_CATS and not ts - ts:
                    ops_add(LAUNCH, (pid, tid), ts, 0.0, "")
                continue
            dur = ev.get("dur")
            # Not a number, NaN or infinite (x - x is then not 0): nothing to place.
            if not isinstance(dur, (int, float)) or ts - ts or dur - dur:
                continue
            if ts < t_min:
                t_min = ts
            if ts + dur > t_max:
                t_max = ts + dur
            name = ev.get("name")
            if not isinstance(name, str):
                name = "" if name is None else str(name)
            args = ev.get("args")
            if not isinstance(args, dict):
                args = {}
            hta = cat is not None and cat != "Trace"
            stream = as_int(args.get("stream")) if hta else -1
            if stream != -1 or pid in device_pids:
                if pid in hccl_pids and not is_ascend_collective(name):
                    # A plane's own task (Level1 up): the Ascend Hardware lanes have it too.
                    continue
                self.device_events += 1
                corr = as_int(args.get("correlation"))
                bd.device(ts, dur, name, corr, args.get("Task Type"))
                if "ProfilerStep" in name:
                    if corr >= 0:
                        bd.host_step_name(name)
                    else:
                        bd.host(ts, name, -1)
                continue
            lane = (pid, tid)
            if hta:
                bd.host(ts, name, as_int(args.get("correlation")))
            if name.startswith("ProfilerStep"):
                # ROCm writes the step's GPU annotation without a stream: not a host step.
                if cat != _GPU_ANNOTATION:
                    self._step(name, ts, dur, lane)
                continue
            sync = sync_name(name)
            if sync is not None:
                syncs_add(sync, ts, dur, lane)
            if cat in _CPU_OP_CATS or (cat is None and name.startswith("aten::")):
                ops_add(OP, lane, ts, dur, name, shapes_of(args))
            elif sync is not None or is_launch(name, cat):
                # A sync call talks to the device too: the op around it did not run on the CPU.
                ops_add(LAUNCH, lane, ts, dur, "")
        self.ops.flush()
        self.events = n
        self.t_min, self.t_max = t_min, t_max

    def _metadata(self, ev: dict[str, Any]) -> None:
        if ev.get("name") != "process_name":
            return
        args = ev.get("args")
        label = args.get("name") if isinstance(args, dict) else None
        pid = ev.get("pid")
        if pid.__class__ not in _KEY_TYPES:
            pid = _key(pid)
        if isinstance(label, str) and len(self.processes) < MAX_PROCESSES:
            self.processes[pid] = label[:200]
            if label in ASCEND_DEVICE_PROCESSES:
                self.device_pids.add(pid)
            if label == ASCEND_HCCL_PROCESS:
                self.hccl_pids.add(pid)

    def _step(self, name: str, ts: float, dur: float, lane: tuple) -> None:
        match = _STEP.search(name)
        self.step_count += 1
        self.step_total += dur
        if len(self.steps) < MAX_STEPS:
            self.steps.append(
                {
                    "name": name,
                    "step": int(match.group(1)) if match else None,
                    "ts_us": ts,
                    "dur_us": dur,
                    "lane": lane_dict(lane),
                }
            )

    @property
    def rank(self) -> int:
        found = self.trace.rank
        return self.index if found is None else found


def summarise(path: str) -> dict[str, Any]:
    """The summary of the trace(s) at ``path``; ``TraceError`` (a ValueError) if unreadable."""
    files = trace_files(path)
    with tempfile.TemporaryDirectory(prefix="npulab-summary-") as tmpdir:
        passes = [_RankPass(file, i, tmpdir) for i, file in enumerate(files)]
        try:
            for rank_pass in passes:
                rank_pass.read()
            return _assemble(path, passes)
        finally:
            for rank_pass in passes:
                rank_pass.breakdown.close()


def _assemble(path: str, passes: list[_RankPass]) -> dict[str, Any]:
    step_names: set[str] = set()
    for p in passes:
        step_names |= p.breakdown.step_names
    # HTA drops the last profiler step when the traces hold more than one (see breakdown).
    drop_last = len(step_names) > 1

    ranks: list[dict[str, Any]] = []
    per_rank_types = []
    kernels: dict[str, tuple[int, list[float]]] = {}
    gaps: dict[int, Any] = {}
    syncs = Syncs()
    fallbacks = Fallbacks()
    for p in sorted(passes, key=lambda p: p.rank):
        filtered = drop_last and p.breakdown.has_correlation and not p.breakdown.filter_unavailable
        numbers = p.breakdown.finish(filtered, p.steps)
        # Over the steps whose device time is known (not the one HTA leaves out).
        known = [s for s in p.steps if s.get("device_idle_us") is not None]
        numbers["steps_us"] = sum(s["dur_us"] for s in known)
        numbers["steps_idle_us"] = sum(s["device_idle_us"] for s in known)
        numbers["steps"] = len(known)
        numbers["profiler_steps"] = p.step_count
        gaps[p.rank] = numbers.pop("longest_idle")
        numbers.pop("first_us")
        ranks.append(
            {"rank": p.rank, "file": p.path.name, "last_step_excluded": filtered, **numbers}
        )
        per_rank_types.append(numbers["kernel_types"])
        for name, (bits, stat) in p.breakdown.kernel_stats().items():
            have = kernels.get(name)
            if have is None:
                kernels[name] = (bits, list(stat))
            else:
                have[1][0] += stat[0]
                have[1][1] += stat[1]
                have[1][2] = max(have[1][2], stat[2])
        syncs.merge(p.syncs)
        fallbacks.merge(p.fallbacks)

    first = min(passes, key=lambda p: p.rank)
    items = first.steps
    durations = [s["dur_us"] for s in items]
    steps = {
        "count": first.step_count,
        "mean_us": first.step_total / first.step_count if first.step_count else None,
        "median_us": median(durations) if durations else None,
        "min_us": min(durations) if durations else None,
        "max_us": max(durations) if durations else None,
        "items": items,
    }
    device_run = any(p.device_events for p in passes)
    t_min = min(p.t_min for p in passes)
    t_max = max(p.t_max for p in passes)
    outputs = [out for out in (ascend_output(p.path) for p in passes) if out]
    meta = first.trace.meta
    names = {bits: t for t in (*ORDER, "OTHER") for bits in (BITS[t],)}
    summary: dict[str, Any] = {
        "version": SUMMARY_VERSION,
        "trace": {
            "path": os.path.basename(os.path.normpath(str(path))),
            "files": [p.path.name for p in passes],
            "format": "ascend"
            if outputs
            else ("kineto" if "deviceProperties" in meta or "schemaVersion" in meta else "chrome"),
            "device": _device(passes, outputs),
            "events": sum(p.events for p in passes),
            "bytes": sum(_size(p.path) for p in passes),
            "start_us": t_min if t_min != math.inf else None,
            "end_us": t_max if t_max != -math.inf else None,
            "duration_us": (t_max - t_min) if t_min != math.inf else None,
            "ranks": len(passes),
            "device_events": sum(p.device_events for p in passes),
            "hta_last_step_excluded": any(r["last_step_excluded"] for r in ranks),
            "distributed": meta.get("distributedInfo")
            if isinstance(meta.get("distributedInfo"), dict)
            else None,
            "processes": sorted({str(v) for p in passes for v in p.processes.values()})[:50],
        },
        "ranks": ranks,
        "kernel_types": combine_types(per_rank_types),
        "top_kernels": top_kernels(kernels, lambda bits: names.get(bits, "OTHER")),
        "top_ops": _merge_ops(passes),
        "steps": steps,
        "syncs": syncs.result(sum(p.step_count for p in passes)),
        "fallbacks": fallbacks.result(device_run),
        "npu": _npu(outputs),
    }
    summary["findings"] = _findings.find(summary, {"gaps": gaps})
    return _clean(summary)


def _merge_ops(passes: list[_RankPass]) -> dict[str, Any]:
    if len(passes) == 1:
        return passes[0].ops.result()
    merged = OpStats()
    for p in passes:
        for key, stat in p.ops.stats.items():
            have = merged.stats.setdefault(key, [0, 0.0, 0.0])
            for i in range(3):
                have[i] += stat[i]
    return merged.result()


def _npu(outputs: list[Path]) -> dict[str, Any] | None:
    if not outputs:
        return None
    views = [npu_views(out) for out in outputs]
    return views[0] if len(views) == 1 else {"ranks": views}


def _device(passes: list[_RankPass], outputs: list[Path]) -> str:
    if outputs or any(p.device_pids for p in passes):
        return "npu"
    # A GPU trace names its devices even where it holds no kernel (CUPTI's range profiler).
    if any(p.device_events or p.trace.meta.get("deviceProperties") for p in passes):
        return "cuda"
    return "cpu"


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _clean(value: Any) -> Any:
    """JSON-ready and stable: floats rounded to the nanosecond, no NaN or infinity."""
    if isinstance(value, float):
        if value != value or value in (math.inf, -math.inf):
            return None
        return round(value, 3)
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value
