"""One rank of a collectives run, started by torch.distributed.run on every host.

``python -m workers.kinds.collectives.loop SPEC.json OUT.json``: every rank runs each
collective over the message sizes; a size's time is the slowest rank's mean over
``iters`` calls after ``warmup``. Rank 0 writes the rows to OUT.json. A collective the
backend does not offer (gloo has no reduce_scatter in some torch versions) is recorded
as unsupported, not as a failure.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from workers.backends import get_backend
from workers.kinds.collectives.busbw import bandwidths, sizes

ELEMENT_BYTES = 4  # float32


def _call(dist: Any, torch: Any, op: str, count: int, n: int, device: Any) -> Any:
    """A function that runs ``op`` once on buffers of ``count`` float32 elements."""
    whole = torch.ones(count, dtype=torch.float32, device=device)
    part = torch.ones(count // n, dtype=torch.float32, device=device)
    if op == "all_reduce":
        return lambda: dist.all_reduce(whole)
    if op == "all_gather":
        parts = [torch.empty_like(part) for _ in range(n)]
        return lambda: dist.all_gather(parts, part)
    if op == "reduce_scatter":
        inputs = [torch.ones_like(part) for _ in range(n)]
        return lambda: dist.reduce_scatter(part, inputs)
    if op == "broadcast":
        return lambda: dist.broadcast(whole, 0)
    if op == "all_to_all":
        out = torch.empty_like(whole)
        return lambda: dist.all_to_all_single(out, whole)
    raise ValueError(op)


def main(argv: list[str]) -> int:
    import torch
    import torch.distributed as dist

    with open(argv[0], encoding="utf-8") as handle:
        spec = json.load(handle)
    backend = get_backend(spec["device_type"])
    backend.load()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if backend.name != "cpu":
        getattr(torch, backend.name).set_device(local)
    dist.init_process_group(backend=backend.dist_backend)
    n, rank = dist.get_world_size(), dist.get_rank()
    device = backend.device(local)
    rows: list[dict[str, Any]] = []
    unsupported: list[str] = []
    for op in spec["ops"]:
        for size in sizes(spec["min_bytes"], spec["max_bytes"]):
            # Whole elements, a multiple of the rank count (the split collectives need it).
            count = max(size // ELEMENT_BYTES // n, 1) * n
            try:
                call = _call(dist, torch, op, count, n, device)
                for _ in range(spec["warmup"]):
                    call()
                backend.synchronize()
                dist.barrier()
                started = time.perf_counter()
                for _ in range(spec["iters"]):
                    call()
                backend.synchronize()
                elapsed = torch.tensor([(time.perf_counter() - started) / spec["iters"]])
            except (RuntimeError, NotImplementedError, ValueError) as exc:
                unsupported.append(f"{op}: {str(exc).splitlines()[0][:200]}")
                dist.barrier()
                break
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
            seconds = float(elapsed.item())
            measured = count * ELEMENT_BYTES
            algbw, busbw = bandwidths(op, measured, seconds, n)
            rows.append(
                {
                    "op": op,
                    "bytes": measured,
                    "ranks": n,
                    "time_us": round(seconds * 1e6, 3),
                    "algbw_gbps": algbw,
                    "busbw_gbps": busbw,
                }
            )
    if rank == 0:
        with open(argv[1], "w", encoding="utf-8") as handle:
            json.dump(
                {"rows": rows, "unsupported": unsupported, "backend": backend.dist_backend}, handle
            )
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
