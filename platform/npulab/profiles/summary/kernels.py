"""Which events are device work, and HTA's kernel types for them.

The kernel types are Holistic Trace Analysis's (``hta.utils.utils.get_kernel_type``,
HolisticTraceAnalysis 0.5.0), with the same regular expressions so the numbers can
be checked against HTA: a communication kernel matches ``^nccl.*Kernel``, a memory
one ``^Memcpy|^Memset|^dma``, and a computation kernel is any other that does not
match ``^nccl.*Kernel|.*Memcpy|Memset|.*Sync``; the rest are OTHER. Ascend tasks
(which HTA does not read) add their own names: HCCL ``hcom_*`` / ``Hccl*`` tasks are
communication, ``MEMCPY*`` tasks memory.
"""

from __future__ import annotations

import re
from typing import Any

COMPUTATION = "COMPUTATION"
COMMUNICATION = "COMMUNICATION"
MEMORY = "MEMORY"
OTHER = "OTHER"

# Bits in HTA's order (kernel_type_to_analysis with include_memory_kernels=True):
# the overlap names join the types in this order.
BITS = {COMPUTATION: 1, COMMUNICATION: 2, MEMORY: 4, OTHER: 0}
ORDER = (COMPUTATION, COMMUNICATION, MEMORY)

_NCCL = re.compile(r"^nccl.*Kernel")
_MEMORY = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_NOT_COMPUTE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")
_ASCEND_COMM = re.compile(r"^(hcom_|Hcom|hccl|Hccl|HCCL)")
_ASCEND_MEMORY = re.compile(r"^(MEMCPY|MemCopy|aclrtMemcpy)", re.IGNORECASE)

# Process names (``M`` events) of the device lanes of a torch_npu trace_view.json.
ASCEND_DEVICE_PROCESSES = ("Ascend Hardware", "HCCL")


def kernel_type(name: str, task_type: str | None = None) -> str:
    """HTA's type of a device event by its name (``task_type``: an Ascend task's)."""
    if _NCCL.match(name) or _ASCEND_COMM.match(name):
        return COMMUNICATION
    if _MEMORY.match(name) or _ASCEND_MEMORY.match(name):
        return MEMORY
    if task_type and task_type.upper().startswith(("MEMCPY", "MEMSET")):
        return MEMORY
    if task_type and task_type.upper().startswith(("HCCL", "COMMUNICATION")):
        return COMMUNICATION
    if not _NOT_COMPUTE.match(name):
        return COMPUTATION
    return OTHER


def overlap_name(mask: int) -> str:
    """HTA's name of a set of types running together ("COMPUTATION overlapping MEMORY")."""
    return " overlapping ".join(t for t in ORDER if mask & BITS[t])


def as_int(value: Any, default: int = -1) -> int:
    """An int the way HTA reads stream and correlation args (-1 when it is not one)."""
    if value is None:
        return default
    if isinstance(value, int):
        return value
    try:
        return int(value)
    except (TypeError, ValueError):
        return default
