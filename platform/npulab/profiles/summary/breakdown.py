"""HTA's temporal and kernel-type breakdowns per rank, in one pass and bounded memory.

Definitions (HolisticTraceAnalysis 0.5.0, ``hta/analyzers/breakdown_analysis.py``):

- *device events* are the events with a ``dur`` and a ``cat`` (not ``Trace``) whose
  ``args.stream`` is an integer other than -1; times are rounded the way HTA's parser
  rounds them (``ts`` up, ``ts + dur`` down, to whole microseconds);
- ``kernel_us`` runs from the first device event's start to the end of the last merged
  busy interval; ``idle_us`` is that span minus the union of all device events;
  ``compute_us`` is the union of the COMPUTATION ones; ``non_compute_us`` the rest;
- the kernel-type breakdown measures the time in which each set of types
  (COMPUTATION, COMMUNICATION, MEMORY) runs together, over the union of each type;
- when the trace holds more than one ``ProfilerStep``, HTA drops the last step: the CPU
  events from the last step's start on, and the kernels not launched (by correlation)
  from a CPU event kept.

Unions need the intervals in start order, and a trace holds them in no particular order
across streams, so the intervals go through an external sort (``extsort``): memory is
one run plus a read buffer per run, whatever the trace's size. The last-step filter keeps a
bitmap of launched correlation ids (one bit each) and the launches of the latest step.
"""

from __future__ import annotations

import math
from typing import Any

from npulab.profiles.summary.extsort import ExternalSort
from npulab.profiles.summary.kernels import BITS, COMPUTATION, ORDER, kernel_type, overlap_name

_GPU_SET = 1  # HTA's GPUKernelFilter: stream >= 0 and correlation >= 0 (or a sync event)
_SYNC_NAMES = ("Event Sync", "Context Sync")
_PAGE_BITS = 16
# Caps on what a hostile trace could make grow: 2,048 pages are 16 MB of bitmap; past
# MAX_NAMES distinct kernel names the rest are counted together per type.
MAX_PAGES = 2048
MAX_NAMES = 20_000
MAX_NAME_CHARS = 512


class _Bitmap:
    """A sparse set of non-negative ints, one bit each (correlation ids are dense)."""

    def __init__(self) -> None:
        self.pages: dict[int, bytearray] = {}

    def add(self, value: int) -> bool:
        """Add it; False when that would take more than MAX_PAGES pages."""
        page = self.pages.get(value >> _PAGE_BITS)
        if page is None:
            if len(self.pages) >= MAX_PAGES:
                return False
            page = self.pages[value >> _PAGE_BITS] = bytearray(1 << (_PAGE_BITS - 3))
        low = value & ((1 << _PAGE_BITS) - 1)
        page[low >> 3] |= 1 << (low & 7)
        return True

    def __contains__(self, value: int) -> bool:
        page = self.pages.get(value >> _PAGE_BITS)
        if page is None:
            return False
        low = value & ((1 << _PAGE_BITS) - 1)
        return bool(page[low >> 3] & (1 << (low & 7)))


class _Union:
    """HTA's ``merge_kernel_intervals`` over intervals fed in start order."""

    __slots__ = ("count", "end", "first", "reach", "start", "total")

    def __init__(self) -> None:
        self.first = self.start = self.end = self.reach = 0.0
        self.total = 0.0
        self.count = 0

    def add(self, ts: float, end: float) -> tuple[float, float] | None:
        """Add one interval; the group it closed, if any."""
        if not self.count:
            self.first = self.start = ts
            self.end = self.reach = end
            self.count = 1
            return None
        self.count += 1
        closed = None
        if ts > self.reach:  # HTA: ts > cummax(previous ends) starts a new group
            closed = (self.start, self.end)
            self.total += self.end - self.start
            self.start, self.end = ts, end
        elif end > self.end:
            self.end = end
        if end > self.reach:
            self.reach = end
        return closed

    def measure(self) -> float:
        return self.total + (self.end - self.start) if self.count else 0.0

    def span(self) -> float:
        return self.end - self.first if self.count else 0.0


class RankBreakdown:
    """The device side of one rank: fed every event, finished once."""

    def __init__(self, tmpdir: str) -> None:
        # (start, end, bits, correlation, flags, name id)
        self.sorter = ExternalSort(tmpdir, (False, False, True, True, True, True))
        self.records = 0
        self.names: dict[str, int] = {}
        self.name_list: list[str] = []
        self.name_bits: list[int] = []
        self.step_names: set[str] = set()
        self.last_step_start = -math.inf
        self.launched = _Bitmap()
        self.late_launches: dict[int, float] = {}
        self.has_correlation = False
        self.filter_unavailable = False  # too many correlation ids to follow (hostile trace)

    # -- feeding ---------------------------------------------------------------------

    def name_id(self, name: str, task_type: str | None = None) -> int:
        found = self.names.get(name)
        if found is None:
            bits = BITS[kernel_type(name, task_type)]
            if len(self.names) >= MAX_NAMES:
                name = f"(other {overlap_name(bits) or 'OTHER'} kernels)"
                found = self.names.get(name)
                if found is not None:
                    return found
            found = self.names[name] = len(self.name_list)
            self.name_list.append(name[:MAX_NAME_CHARS])
            self.name_bits.append(bits)
        return found

    def device(
        self, ts: float, dur: float, name: str, correlation: int, task_type: str | None = None
    ) -> None:
        """One device event (HTA: stream != -1)."""
        start = math.ceil(ts)
        # HTA's whole microseconds; an event shorter than one is empty, never negative.
        end = max(start, math.floor(ts + dur))
        nid = self.name_id(name, task_type)
        flags = _GPU_SET if correlation >= 0 or name in _SYNC_NAMES else 0
        if correlation >= 0:
            self.has_correlation = True
        self.sorter.add((start, end, self.name_bits[nid], correlation, flags, nid))
        self.records += 1

    def host(self, ts: float, name: str, correlation: int) -> None:
        """One CPU-side event with a ``dur`` and a ``cat`` (for the last-step filter)."""
        start = math.ceil(ts)
        if "ProfilerStep" in name:
            if len(self.step_names) < 2:  # only "more than one" matters
                self.step_names.add(name)
            if start > self.last_step_start:
                self.last_step_start = start
                # Launches before the newest step's start can no longer be in the last step.
                self.late_launches = {c: t for c, t in self.late_launches.items() if t >= start}
        if correlation >= 0:
            if not self.launched.add(correlation):
                self.filter_unavailable = True
            if start >= self.last_step_start:
                self.late_launches[correlation] = start

    def host_step_name(self, name: str) -> None:
        """A ``ProfilerStep`` name seen on a device event (HTA counts its symbols too)."""
        if len(self.step_names) < 2:
            self.step_names.add(name)

    # -- results -----------------------------------------------------------------------

    def finish(
        self, drop_last_step: bool, steps: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """The rank's numbers. ``drop_last_step``: HTA's filter applies (see the module)."""
        every = _Union()
        by_mask = {mask: _Union() for mask in range(1, 8)}
        unions_for = {bit: [u for m, u in by_mask.items() if m & bit] for bit in (1, 2, 4)}
        kernel_stats: dict[int, list[float]] = {}
        last_start = self.last_step_start
        late = self.late_launches
        launched = self.launched
        steps = sorted(steps or [], key=lambda s: s["ts_us"])
        step_busy = [0.0] * len(steps)
        step_i = 0
        gap = (0.0, 0.0, 0.0)  # dur, ts, end of the longest idle gap
        prev_end = None
        kept = 0

        def close(group: tuple[float, float]) -> None:
            nonlocal step_i, prev_end, gap
            g0, g1 = group
            if prev_end is not None and g0 - prev_end > gap[0]:
                gap = (g0 - prev_end, prev_end, g0)
            prev_end = g1
            while step_i < len(steps) and steps[step_i]["ts_us"] + steps[step_i]["dur_us"] <= g0:
                step_i += 1
            j = step_i
            while j < len(steps) and steps[j]["ts_us"] < g1:
                s0 = steps[j]["ts_us"]
                s1 = s0 + steps[j]["dur_us"]
                overlap = min(g1, s1) - max(g0, s0)
                if overlap > 0:
                    step_busy[j] += overlap
                j += 1

        for start, end, bits, correlation, flags, nid in self.sorter.sorted():
            if drop_last_step:
                if flags & _GPU_SET:
                    if (
                        correlation < 0
                        or correlation not in launched
                        or late.get(correlation, -math.inf) >= last_start
                    ):
                        continue
                elif not start < last_start:
                    continue
            kept += 1
            closed = every.add(start, end)
            if closed is not None:
                close(closed)
            if bits:
                for union in unions_for[bits]:
                    union.add(start, end)
            stat = kernel_stats.get(nid)
            if stat is None:
                kernel_stats[nid] = [1, end - start, end - start]
            else:
                stat[0] += 1
                stat[1] += end - start
                if end - start > stat[2]:
                    stat[2] = end - start
        if every.count:
            close((every.start, every.end))

        kernel_us = every.span()
        idle_us = kernel_us - every.measure()
        compute_us = by_mask[BITS[COMPUTATION]].measure()
        non_compute_us = kernel_us - compute_us - idle_us
        types = _type_breakdown({mask: u.measure() for mask, u in by_mask.items()})
        result = {
            "idle_us": idle_us,
            "compute_us": compute_us,
            "non_compute_us": non_compute_us,
            "kernel_us": kernel_us,
            "idle_pct": _pct(idle_us, kernel_us),
            "compute_pct": _pct(compute_us, kernel_us),
            "non_compute_pct": _pct(non_compute_us, kernel_us),
            "device_events": kept,
            "kernel_types": types,
            "first_us": every.first if every.count else None,
            "longest_idle": {"ts_us": gap[1], "dur_us": gap[0]} if gap[0] > 0 else None,
        }
        for step, busy in zip(steps, step_busy, strict=False):
            # The step HTA leaves out has lost its kernels: its device time is not known.
            known = every.count and not (drop_last_step and math.ceil(step["ts_us"]) >= last_start)
            step["device_busy_us"] = busy if known else None
            step["device_idle_us"] = max(step["dur_us"] - busy, 0.0) if known else None
        self._kernel_stats = {
            self.name_list[nid]: (self.name_bits[nid], stat) for nid, stat in kernel_stats.items()
        }
        return result

    def kernel_stats(self) -> dict[str, tuple[int, list[float]]]:
        """name -> (type bits, [count, total µs, max µs]) of the kept device events."""
        return self._kernel_stats

    def close(self) -> None:
        self.sorter.close()


def _type_breakdown(unions: dict[int, float]) -> list[dict[str, Any]]:
    """Time in which exactly each set of types runs, from the unions of every subset.

    U(X) is the measure of the union of the types in X. The time in which the running
    set A is non-empty and inside T is U(all) - U(all - T); inclusion-exclusion over the
    subsets of S gives the time in which A is exactly S. With intervals of non-negative
    length this equals HTA's sweep over +/- boundaries of the per-type merged intervals.
    """
    full = 7

    def u(mask: int) -> float:
        return unions.get(mask, 0.0) if mask else 0.0

    def inside(mask: int) -> float:
        return u(full) - u(full & ~mask)

    out = []
    for mask in range(1, 8):
        total = 0.0
        sub = mask
        while True:
            sign = -1 if (bin(mask).count("1") - bin(sub).count("1")) % 2 else 1
            total += sign * inside(sub)
            if sub == 0:
                break
            sub = (sub - 1) & mask
        if total:
            out.append({"type": overlap_name(mask), "us": total})
    return out


def combine_types(per_rank: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """HTA's table over all ranks: the sum per type, its share, largest first."""
    sums: dict[str, float] = {}
    for types in per_rank:
        for item in types:
            sums[item["type"]] = sums.get(item["type"], 0.0) + item["us"]
    total = sum(sums.values())
    rows = [
        {"type": t, "us": us, "pct": round(100 * us / total, 1) if total else 0.0}
        for t, us in sums.items()
    ]
    rows.sort(key=lambda r: (-r["us"], r["type"]))
    return rows


def _pct(part: float, whole: float) -> float:
    return round(100 * part / whole, 2) if whole else 0.0


__all__ = ["ORDER", "RankBreakdown", "combine_types"]
