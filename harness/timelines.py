"""Synthetic Kineto traces of a given size, shaped like a training step's: a CPU thread of
nested ops under ProfilerStep#N, an autograd thread, and two device streams of kernels and
copies. The tests index them against brute force; bench/profile_timeline.py times them."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CPU_PID, MAIN_TID, AUTOGRAD_TID = 4242, 4242, 4250
DEVICE_PID, COMPUTE_STREAM, COPY_STREAM = 0, 7, 20
OPS = ("aten::linear", "aten::layer_norm", "aten::gelu", "aten::softmax", "aten::dropout")
KERNELS = (
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>",
    "void at::native::(anonymous namespace)::softmax_warp_forward<float, float, 10>",
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
)
T0 = 1_700_000_000_000_000.0


def metadata() -> list[dict[str, Any]]:
    def meta(what: str, pid: int, tid: int, **args: Any) -> dict[str, Any]:
        return {"ph": "M", "name": what, "pid": pid, "tid": tid, "args": args}

    return [
        meta("process_name", CPU_PID, 0, name="python"),
        meta("process_labels", CPU_PID, 0, labels="CPU"),
        meta("thread_name", CPU_PID, MAIN_TID, name="thread 4242 (python)"),
        meta("thread_name", CPU_PID, AUTOGRAD_TID, name="thread 4250 (autograd)"),
        meta("process_name", DEVICE_PID, 0, name="GPU 0"),
        meta("process_labels", DEVICE_PID, 0, labels="GPU 0"),
        meta("thread_name", DEVICE_PID, COMPUTE_STREAM, name="stream 7"),
        meta("thread_name", DEVICE_PID, COPY_STREAM, name="stream 20"),
    ]


def step_events(step: int, at: float, rng: random.Random) -> Iterator[dict[str, Any]]:
    """One training step from ``at``: its events, the step's own first."""
    ops = []
    t = at + 5.0
    device = at + 20.0
    for index in range(rng.randint(30, 50)):
        name = OPS[index % len(OPS)]
        dur = rng.uniform(8, 120)
        children = []
        inner = t + 1.0
        for child in ("aten::addmm", "cudaLaunchKernel"):
            child_dur = rng.uniform(0.5, max(1.0, (t + dur - inner) / 3))
            children.append((child, inner, child_dur))
            inner += child_dur + 0.5
        kernel_dur = rng.choice((1.2, 3.5, rng.uniform(5, 300)))
        device = max(device, t + 3.0)
        ops.append((name, t, dur, children, device, kernel_dur, index))
        device += kernel_dur + rng.uniform(0.2, 4)
        t += dur + rng.uniform(0.5, 3)
    end = max(t, device) + 5.0
    yield _x(f"ProfilerStep#{step}", "user_annotation", MAIN_TID, CPU_PID, at, end - at, {})
    for name, start, dur, children, kstart, kdur, index in ops:
        correlation = step * 1000 + index
        yield _x(name, "cpu_op", MAIN_TID, CPU_PID, start, dur, _args(rng, correlation))
        for child, cstart, cdur in children:
            yield _x(child, "cpu_op", MAIN_TID, CPU_PID, cstart, cdur, {"correlation": correlation})
        yield _x(
            KERNELS[index % len(KERNELS)],
            "kernel",
            COMPUTE_STREAM,
            DEVICE_PID,
            kstart,
            kdur,
            {"correlation": correlation, "grid": [128, 1, 1], "block": [256, 1, 1], "stream": 7},
        )
        if index % 7 == 0:
            yield _x(
                "Memcpy HtoD (Pageable -> Device)",
                "gpu_memcpy",
                COPY_STREAM,
                DEVICE_PID,
                kstart,
                rng.uniform(2, 40),
                {"bytes": 4096 * (index + 1), "stream": 20},
            )
        if index % 3 == 0:
            yield _x(
                "autograd::engine::evaluate_function: AddmmBackward0",
                "cpu_op",
                AUTOGRAD_TID,
                CPU_PID,
                start + 2.0,
                dur / 2,
                {"Sequence number": correlation},
            )
    return end


def _x(name: str, cat: str, tid: int, pid: int, ts: float, dur: float, args: dict) -> dict:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": pid,
        "tid": tid,
        "ts": round(ts, 3),
        "dur": round(dur, 3),
        "args": args,
    }


def _args(rng: random.Random, correlation: int) -> dict[str, Any]:
    return {
        "External id": correlation,
        "Record function id": 0,
        "Input Dims": [[rng.choice((32, 64, 128)), 1024], [1024, 1024], []],
        "Input type": ["float", "float", "Scalar"],
        "Sequence number": correlation,
        "Fwd thread id": 1,
    }


def write_trace(path: Path, target_bytes: int, seed: int = 0) -> dict[str, Any]:
    """A Kineto-shaped trace of about ``target_bytes`` at ``path``; how many steps and events."""
    rng = random.Random(seed)
    steps = events = 0
    at = T0
    with open(path, "w") as out:
        out.write('{"schemaVersion": 1, "displayTimeUnit": "ms", "traceEvents": [\n')
        out.write(",\n".join(json.dumps(event) for event in metadata()))
        while out.tell() < target_bytes:
            generator = step_events(steps + 1, at, rng)
            try:
                while True:
                    out.write(",\n" + json.dumps(next(generator)))
                    events += 1
            except StopIteration as done:
                at = done.value + rng.uniform(10, 50)
            steps += 1
        out.write('\n], "traceName": "generated"}\n')
    return {"path": str(path), "bytes": path.stat().st_size, "steps": steps, "events": events}
