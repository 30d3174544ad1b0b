"""Host-to-device synchronisation points: where the CPU waits for the device.

Each one stalls the launch queue, so a few a step are normal and hundreds are a
finding. Counted by name: the runtime calls (CUDA, AscendCL) and the torch ops that
imply one (``aten::item``, ``aten::nonzero`` ... copy a result to the host). The ops
nest (``aten::item`` calls ``aten::_local_scalar_dense`` which synchronises a
stream), so each name is its own row rather than one grand total.
"""

from __future__ import annotations

from typing import Any

from npulab.profiles.summary.occurrences import Occurrences

SYNC_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cuCtxSynchronize",
        "cuStreamSynchronize",
        "cuEventSynchronize",
        "aclrtSynchronizeDevice",
        "aclrtSynchronizeStream",
        "aclrtSynchronizeStreamWithTimeout",
        "aclrtSynchronizeEvent",
        "aclrtSynchronizeDeviceWithTimeout",
    }
)
SYNC_OPS = frozenset(
    {
        "aten::item",
        "aten::nonzero",
        "aten::_local_scalar_dense",
        "aten::masked_select",
        "aten::unique",
        "aten::_unique2",
        "aten::is_nonzero",
    }
)
# What the finding names first: the op a user wrote rather than the call under it.
USER_LEVEL = (
    "aten::nonzero",
    "aten::item",
    "aten::masked_select",
    "aten::unique",
    "aten::_unique2",
)


def sync_name(name: str) -> str | None:
    """The sync point's name, or None. AscendCL calls appear as ``AscendCL@aclrt...``."""
    if name in SYNC_OPS or name in SYNC_CALLS:
        return name
    if "@" in name:
        tail = name.rsplit("@", 1)[1]
        if tail in SYNC_CALLS:
            return tail
    return None


class Syncs(Occurrences):
    """Count, time and the longest occurrence of each sync point."""

    def result(self, steps: int) -> list[dict[str, Any]]:
        rows = [
            {
                "name": name,
                "count": count,
                "us": total,
                "per_step": round(count / steps, 2) if steps else None,
                "max_us": longest,
                "ts_us": ts,
                "dur_us": longest,
                "lane": lane,
            }
            for name, count, total, longest, ts, lane in self.each()
        ]
        rows.sort(key=lambda r: (-r["count"], r["name"]))
        return rows
