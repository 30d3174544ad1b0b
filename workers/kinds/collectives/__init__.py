"""The collectives kind: bus bandwidth of the collectives across message sizes (nccl-tests'
definitions), on HCCL, NCCL or gloo, within one host and across hosts."""

from __future__ import annotations

from typing import Any

from workers.contract.events import EventType
from workers.contract.kinds import Kind
from workers.contract.spec import Field, common_fields, hosts_field

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")
BUSBW = "busbw"
MAX_BYTES = 1 << 30


def _check(spec: dict[str, Any]) -> dict[str, str]:
    errors = {}
    unknown = [op for op in spec["ops"] if op not in OPS]
    if unknown or not spec["ops"]:
        errors["ops"] = "one or more of: " + ", ".join(OPS)
    if spec["min_bytes"] > spec["max_bytes"]:
        errors["min_bytes"] = "must not be above max_bytes"
    return errors


KIND = Kind(
    "collectives",
    "Collectives: bus bandwidth of all_reduce, all_gather, reduce_scatter, broadcast and "
    "all-to-all across message sizes",
    "workers.kinds.collectives.runner",
    [
        *common_fields(default_timeout_s=3600),
        hosts_field(),
        Field("ops", "strings", default=list(OPS), help="Collectives to measure."),
        Field(
            "min_bytes",
            "integer",
            default=8,
            minimum=4,
            maximum=MAX_BYTES,
            help="Smallest message (bytes); sizes double up to max_bytes.",
        ),
        Field(
            "max_bytes",
            "integer",
            default=64 << 20,
            minimum=4,
            maximum=MAX_BYTES,
            help="Largest message (bytes), up to 1 GiB.",
        ),
        Field("iters", "integer", default=20, minimum=1, maximum=10000),
        Field("warmup", "integer", default=5, minimum=0, maximum=1000),
    ],
    event_types=(
        EventType(
            BUSBW,
            {
                "op": ("string",),
                "bytes": ("integer",),
                "ranks": ("integer",),
                "time_us": ("number",),
                "algbw_gbps": ("number",),
                "busbw_gbps": ("number",),
            },
            ("op", "bytes", "ranks", "time_us", "algbw_gbps", "busbw_gbps"),
        ),
    ),
    check=_check,
)
