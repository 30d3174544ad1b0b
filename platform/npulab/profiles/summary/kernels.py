"""Which events are device work, and HTA's kernel types for them.

The kernel types are Holistic Trace Analysis's (``hta.utils.utils.get_kernel_type``,
HolisticTraceAnalysis 0.5.0), with the same regular expressions so the numbers can
be checked against HTA: a communication kernel matches ``^nccl.*Kernel``, a memory
one ``^Memcpy|^Memset|^dma``, and a computation kernel is any other that does not
match ``^nccl.*Kernel|.*Memcpy|Memset|.*Sync``; the rest are OTHER. Ascend tasks
(which HTA does not read) add their own names: HCCL ``hcom_*`` / ``Hccl*`` ops and the
tasks HCCL runs on its streams (``Notify Wait``, ``SDMA``, ``RDMA``, ``Write Value``,
``Reduce_Inline``: torch_npu's step_trace_time.csv counts them as communication) are
communication, ``MEMCPY*`` tasks memory, and a stream waiting for another's event
(``EVENT_WAIT``) is no work: OTHER.
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
# Task types (args "Task Type") of the tasks HCCL puts on the device, spelled with a space
# on the Ascend Hardware lanes and with "_" on the HCCL process's planes.
_ASCEND_HCCL_TASKS = frozenset(
    (
        "NOTIFY_WAIT",
        "NOTIFY_RECORD",
        "SDMA",
        "RDMA",
        "RDMA_SEND",
        "RDMASEND",
        "WRITE_VALUE",
        "REDUCE_INLINE",
        "REDUCE_TBE",
    )
)
_ASCEND_WAITS = frozenset(("EVENT_WAIT", "EVENT_WAIT_SQE", "EVENT_RECORD", "EVENT_RECORD_SQE"))

# Process names (``M`` events) of the device lanes of a torch_npu trace_view.json. The HCCL
# process holds each collective's span ("Group 0 Communication") and, from Level1 up, the
# same tasks the Ascend Hardware lanes show, once more per plane ("Plane 0", ...).
ASCEND_HCCL_PROCESS = "HCCL"
ASCEND_DEVICE_PROCESSES = ("Ascend Hardware", ASCEND_HCCL_PROCESS)


def kernel_type(name: str, task_type: str | None = None) -> str:
    """HTA's type of a device event by its name (``task_type``: an Ascend task's)."""
    if _NCCL.match(name) or _ASCEND_COMM.match(name):
        return COMMUNICATION
    if task_type:
        task = task_type.upper().replace(" ", "_")
        if task in _ASCEND_HCCL_TASKS:
            return COMMUNICATION
        if task in _ASCEND_WAITS:
            return OTHER
    if _MEMORY.match(name) or _ASCEND_MEMORY.match(name):
        return MEMORY
    if task_type and task_type.upper().startswith(("MEMCPY", "MEMSET")):
        return MEMORY
    if task_type and task_type.upper().startswith(("HCCL", "COMMUNICATION")):
        return COMMUNICATION
    if not _NOT_COMPUTE.match(name):
        return COMPUTATION
    return OTHER


def is_ascend_collective(name: str) -> bool:
    """Whether an event of the HCCL process is a collective's span (``hcom_allReduce_…``),
    not one of its planes' tasks."""
    return bool(_ASCEND_COMM.match(name))


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
