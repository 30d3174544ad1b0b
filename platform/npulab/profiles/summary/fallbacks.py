"""Operators that ran on the CPU inside a device run.

An op whose subtree put no work on the device (no launch call, no flow to the device)
while the run had device work computed on the host: a CPU fallback (torch_npu's
"will fall back to run on the CPU"), a tensor left on the CPU, or host-side
preprocessing inside the step. Ops that only describe tensors (views, reshapes,
allocation) never launch anything and are left out. Only a run with device events
reports fallbacks; in a CPU-only run every op is a CPU op.
"""

from __future__ import annotations

from typing import Any

from npulab.profiles.summary.occurrences import Occurrences
from npulab.profiles.summary.sync import SYNC_OPS

# Ops that are bookkeeping, not computation: they run on the host by design.
METADATA_OPS = frozenset(
    [
        "aten::view",
        "aten::reshape",
        "aten::_reshape_alias",
        "aten::_unsafe_view",
        "aten::view_as",
        "aten::empty",
        "aten::empty_strided",
        "aten::empty_like",
        "aten::new_empty",
        "aten::new_empty_strided",
        "aten::as_strided",
        "aten::t",
        "aten::transpose",
        "aten::permute",
        "aten::expand",
        "aten::expand_as",
        "aten::squeeze",
        "aten::unsqueeze",
        "aten::slice",
        "aten::select",
        "aten::detach",
        "aten::detach_",
        "detach",
        "aten::alias",
        "aten::resize_",
        "aten::size",
        "aten::stride",
        "aten::numel",
        "aten::lift_fresh",
        "aten::set_",
        "aten::unbind",
        "aten::split",
        "aten::chunk",
        "aten::narrow",
        "aten::flatten",
        "aten::result_type",
        "aten::contiguous",
        "aten::_has_compatible_shallow_copy_type",
        "aten::is_same_size",
        "aten::dim",
        "aten::record_stream",
        "aten::to",
        "aten::_to_copy",
        "aten::copy_",
        "aten::item",
        "aten::_local_scalar_dense",
        "aten::is_nonzero",
        "aten::zero_",
        "aten::fill_",
        "aten::random_",
        "aten::empty_permuted",
        "aten::resolve_conj",
        "aten::resolve_neg",
        "aten::conj",
        "aten::_nested_tensor_from_mask",
        "aten::split_with_sizes",
        "aten::unflatten",
        "aten::movedim",
        "aten::diagonal",
        "aten::indices",
        "aten::values",
    ]
)
MIN_US = 5.0
MAX_NAMES = 5000
TOP = 20


class Fallbacks(Occurrences):
    """Fed every completed op (``ops.OpStats.on_close``); keeps the ones that launched nothing."""

    def __init__(self) -> None:
        super().__init__(limit=MAX_NAMES)

    def __call__(self, frame: Any) -> bool:
        """Count the op if it is one; True when it was (its ancestors are then skipped)."""
        if (
            frame.launched
            or frame.covered
            or frame.dur < MIN_US
            or frame.name in METADATA_OPS
            or frame.name in SYNC_OPS
        ):
            return frame.covered
        if not frame.name.startswith(("aten::", "npu::", "torch_npu::")):
            return False
        self.add(frame.name, frame.ts, frame.dur, frame.lane)
        return True

    def result(self, device_run: bool) -> list[dict[str, Any]]:
        if not device_run:
            return []
        rows = [
            {
                "name": name,
                "count": count,
                "us": total,
                "max_us": longest,
                "ts_us": ts,
                "dur_us": longest,
                "lane": lane,
            }
            for name, count, total, longest, ts, lane in self.each()
        ]
        rows.sort(key=lambda r: (-r["us"], r["name"]))
        return rows[:TOP]
