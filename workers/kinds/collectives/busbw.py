"""nccl-tests' bandwidths (doc/PERFORMANCE.md of NVIDIA/nccl-tests).

``algbw = S / t`` with S the operation's size as nccl-tests counts it; ``busbw``
scales it to what each link carries, so that it can be compared with the
hardware's peak whatever the rank count n:

| op | S | busbw |
| --- | --- | --- |
| all_reduce | the buffer | algbw × 2(n−1)/n |
| all_gather | the gathered output | algbw × (n−1)/n |
| reduce_scatter | the input | algbw × (n−1)/n |
| broadcast | the buffer | algbw |
| all_to_all | one rank's send buffer | algbw × (n−1)/n |
"""

from __future__ import annotations


def bus_factor(op: str, ranks: int) -> float:
    if ranks < 1:
        raise ValueError("ranks must be at least 1")
    if op == "all_reduce":
        return 2.0 * (ranks - 1) / ranks
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (ranks - 1) / ranks
    if op == "broadcast":
        return 1.0
    raise ValueError(f"unknown collective {op!r}")


def bandwidths(op: str, size_bytes: int, seconds: float, ranks: int) -> tuple:
    """(algbw, busbw) in GB/s (10^9 bytes a second, as nccl-tests prints them)."""
    algbw = size_bytes / seconds / 1e9
    return algbw, algbw * bus_factor(op, ranks)


def sizes(low: int, high: int) -> list:
    """low, 2·low, 4·low ... up to high (high itself included)."""
    found = []
    size = low
    while size < high:
        found.append(size)
        size *= 2
    found.append(high)
    return found
