"""CPU operators: total and self time, count, with their input shapes.

Self time needs each op's children, so the ops of each thread go through a stack in
start order. A trace is not in that order: Kineto writes a thread's ``cpu_op`` events
long before its ``cuda_runtime`` ones (thousands of events apart), so every op and launch
goes through an external sort by thread and start (``extsort``), as the device
intervals do.
The same stack tells which ops launched device work (a launch call or a flow to the
device inside them), for ``fallbacks``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from npulab.profiles.summary.extsort import ExternalSort

try:  # a platform dependency; the standard library writes the same, slower
    from orjson import dumps as _dumps
except ImportError:  # pragma: no cover

    def _dumps(value: Any) -> bytes:
        return json.dumps(value, separators=(",", ":")).encode()


# A trace with more threads than this (hostile, or a runaway pool) has the rest share one
# lane: their counts and totals stay right, their self times may not.
MAX_THREADS = 4096
_SHARED_LANE = ("…", "…")
MAX_NAME_CHARS = 512
MAX_KEYS = 20_000
MAX_SHAPES_CHARS = 160
TOP = 15

OP = 0
LAUNCH = 1

_LAUNCH_WORDS = ("Launch", "Memcpy", "Memset", "aclnn", "aclop", "LaunchKernel")


def is_launch(name: str, cat: str | None) -> bool:
    """A host call that puts work on the device (CUDA runtime/driver, AscendCL)."""
    # "Runtime": PyTorch 1.8 and 1.9's Kineto.
    if cat in ("cuda_runtime", "cuda_driver", "Runtime"):
        return any(word in name for word in _LAUNCH_WORDS)
    return name.startswith(("aclnn", "aclop", "AscendCL@aclnn", "AscendCL@aclop"))


def shapes_of(args: Any) -> str:
    """An op's input shapes as compact text ("" when the trace has none)."""
    if not isinstance(args, dict):
        return ""
    dims = args.get("Input Dims", args.get("Input Shapes", args.get("input_shapes")))
    if dims in (None, "", []):
        return ""
    if isinstance(dims, str):
        return dims[:MAX_SHAPES_CHARS]
    try:
        text = _dumps(dims).decode()
    except (TypeError, ValueError):  # what orjson will not write (huge ints): the slow way
        text = json.dumps(dims, separators=(",", ":"), default=str)
    return text[:MAX_SHAPES_CHARS]


class _Frame:
    __slots__ = ("child", "covered", "dur", "end", "lane", "launched", "name", "shapes", "ts")

    def __init__(self, name: str, shapes: str, ts: float, dur: float, lane: tuple) -> None:
        self.name = name
        self.shapes = shapes
        self.ts = ts
        self.dur = dur
        self.end = ts + dur
        self.child = 0.0
        self.launched = False
        self.covered = False  # a descendant was already reported (fallbacks)
        self.lane = lane


class OpStats:
    """Aggregates every thread's ops; ``on_close(frame)`` sees each op once it is complete,
    all of them in ``flush()``. ``tmpdir``: where sorted runs are spilled."""

    def __init__(
        self, on_close: Callable[[_Frame], None] | None = None, tmpdir: str | None = None
    ) -> None:
        # (lane, ts, -dur, seq, kind, key)
        self.sorter = ExternalSort(tmpdir, (True, False, False, True, True, True))
        self.lanes: dict[tuple, int] = {}
        self.lane_of: list[tuple] = []
        self.keys: dict[tuple[str, str], int] = {}
        self.key_of: list[tuple[str, str]] = []
        self.stats: dict[tuple[str, str], list[float]] = {}  # -> [count, total, self]
        self.seq = 0
        self.on_close = on_close

    def add(
        self, kind: int, lane: tuple, ts: float, dur: float, name: str, shapes: str = ""
    ) -> None:
        lane_id = self.lanes.get(lane)
        if lane_id is None:
            if len(self.lane_of) >= MAX_THREADS:
                lane = _SHARED_LANE
                lane_id = self.lanes.get(lane)
            if lane_id is None:
                lane_id = self.lanes[lane] = len(self.lane_of)
                self.lane_of.append(lane)
        self.seq += 1
        key = 0 if kind == LAUNCH else self._key_id(name[:MAX_NAME_CHARS], shapes)
        self.sorter.add((lane_id, ts, -dur, self.seq, kind, key))

    def _key_id(self, name: str, shapes: str) -> int:
        key = (name, shapes)
        found = self.keys.get(key)
        if found is None:
            if len(self.keys) >= MAX_KEYS:
                key = (name, "…")
                found = self.keys.get(key)
            if found is None:
                found = self.keys[key] = len(self.key_of)
                self.key_of.append(key)
        return found

    def flush(self) -> None:
        """Every op and launch so far, in order per thread, through its thread's stack."""
        stack: list[_Frame] = []
        current = -1
        for lane_id, ts, neg_dur, _seq, kind, key in self.sorter.sorted():
            if lane_id != current:
                while stack:
                    self._close(stack)
                current = lane_id
            while stack and stack[-1].end <= ts:
                self._close(stack)
            if kind == LAUNCH:
                if stack:
                    # A runtime call is the op's child: its time is not the op's self time.
                    stack[-1].launched = True
                    stack[-1].child += -neg_dur
                continue
            name, shapes = self.key_of[key]
            frame = _Frame(name, shapes, ts, -neg_dur, self.lane_of[lane_id])
            if stack:
                stack[-1].child += frame.dur
            stack.append(frame)
        while stack:
            self._close(stack)
        self.sorter.close()

    def _close(self, stack: list) -> None:
        frame = stack.pop()
        if frame.launched and stack:
            stack[-1].launched = True
        if self._account(frame) and stack:
            stack[-1].covered = True

    def _account(self, frame: _Frame) -> bool:
        key = (frame.name, frame.shapes)
        stat = self.stats.get(key)
        if stat is None:
            if len(self.stats) >= MAX_KEYS:
                key = (frame.name, "…")
                stat = self.stats.get(key)
            if stat is None:
                stat = self.stats[key] = [0, 0.0, 0.0]
        stat[0] += 1
        stat[1] += frame.dur
        stat[2] += max(frame.dur - frame.child, 0.0)
        if self.on_close is not None:
            return bool(self.on_close(frame))
        return False

    def result(self) -> dict[str, Any]:
        rows = [
            {
                "name": name,
                "shapes": shapes,
                "count": int(stat[0]),
                "total_us": stat[1],
                "self_us": stat[2],
                "mean_us": stat[1] / stat[0] if stat[0] else 0.0,
            }
            for (name, shapes), stat in self.stats.items()
        ]
        return {
            "by_total": sorted(rows, key=lambda r: (-r["total_us"], r["name"]))[:TOP],
            "by_self": sorted(rows, key=lambda r: (-r["self_us"], r["name"]))[:TOP],
            "by_count": sorted(rows, key=lambda r: (-r["count"], r["name"]))[:TOP],
            "distinct": len(rows),
        }


def top_kernels(
    stats: dict[str, tuple[int, list[float]]], type_of: Callable[[int], str]
) -> list[dict[str, Any]]:
    """The device kernels with most total time (HTA's rounded durations)."""
    total = sum(s[1] for _bits, s in stats.values()) or 1.0
    rows = [
        {
            "name": name,
            "type": type_of(bits),
            "us": stat[1],
            "count": int(stat[0]),
            "mean_us": stat[1] / stat[0] if stat[0] else 0.0,
            "max_us": stat[2],
            "pct": round(100 * stat[1] / total, 2),
        }
        for name, (bits, stat) in stats.items()
    ]
    rows.sort(key=lambda r: (-r["us"], r["name"]))
    return rows[: TOP + 5]
