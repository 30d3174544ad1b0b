"""Kineto traces of a CUDA training job, synthesised (this machine has no GPU).

The format is what ``torch.profiler`` writes with CUDA activities (Kineto's
ChromeTraceLogger): ``deviceProperties``, ``distributedInfo`` with the rank, the CPU
events first (``ProfilerStep#N`` user annotations, ``cpu_op``s with their input dims,
``cuda_runtime`` launches with a ``correlation``, ``ac2g`` flows), then the GPU
activities (``kernel``, ``gpu_memcpy``, ``gpu_memset`` on numbered streams, NCCL
kernels on their own stream) with nanosecond-precision float timestamps. Each step
starts with host-only time (a data loader), calls ``aten::nonzero`` and ``aten::item``
(each a ``cudaStreamSynchronize``) and runs one op on the CPU (``aten::randperm``).

Used by the tests (checked against HTA itself) and by bench/profiles.py; a fixed seed
gives the same bytes every time.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

BASE_TS = 5_285_110_810_586.524
GPU_PID = 0
COMPUTE_STREAM = 7
COMM_STREAM = 20
COPY_STREAM = 21

COMPUTE_KERNELS = (
    "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)",
    "ampere_sgemm_128x64_tn",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3>)",
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
    "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
    "at::native::func_wrapper_t<float, "
    "at::native::sum_functor<float, float, float>::operator()>, unsigned int, float, 4> >",
)
OPS = ("aten::addmm", "aten::add", "aten::_softmax", "aten::sum", "aten::mm")
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


class _Writer:
    def __init__(self, path: Path) -> None:
        self.path = path
        opener = gzip.open if path.name.endswith(".gz") else open
        self.stream = opener(path, "wt", encoding="utf-8")
        self.first = True

    def header(self, rank: int, world: int) -> None:
        head = {
            "schemaVersion": 1,
            "deviceProperties": [
                {
                    "id": 0,
                    "name": "NVIDIA A100-SXM4-80GB",
                    "totalGlobalMem": 85_093_302_272,
                    "computeMajor": 8,
                    "computeMinor": 0,
                    "numSms": 108,
                }
            ],
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world},
            "record_shapes": 1,
        }
        text = json.dumps(head, indent=2)
        self.stream.write(text[:-2] + ',\n  "traceEvents": [\n')

    def event(self, ev: dict[str, Any]) -> None:
        # Kineto's own layout: one field a line, the args on one line of their own.
        if not self.first:
            self.stream.write(",\n")
        self.first = False
        fields = [f'    "{k}": {json.dumps(v)}' for k, v in ev.items() if k != "args"]
        if "args" in ev:
            inner = ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in ev["args"].items())
            fields.append('    "args": {\n      ' + inner + "\n    }")
        self.stream.write("  {\n" + ",\n".join(fields) + "\n  }")

    def close(self) -> None:
        self.stream.write(
            f'\n  ],\n  "traceName": "{self.path.name}",\n  "displayTimeUnit": "ms"\n}}\n'
        )
        self.stream.close()


def write_trace(
    path: str | Path,
    *,
    rank: int = 0,
    world: int = 1,
    steps: int = 6,
    kernels_per_step: int = 40,
    seed: int = 7,
    target_bytes: int | None = None,
) -> Path:
    """Write one rank's trace; with ``target_bytes``, as many steps as reach that size."""
    rng = random.Random(seed * 1000 + rank)
    path = Path(path)
    out = _Writer(path)
    out.header(rank, world)
    pid = 1000 + rank
    tid = pid
    for ev in (
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "python"}},
        {
            "ph": "M",
            "name": "thread_name",
            "pid": pid,
            "tid": tid,
            "args": {"name": f"thread {tid} (python)"},
        },
        {"ph": "M", "name": "process_name", "pid": GPU_PID, "tid": 0, "args": {"name": "GPU 0"}},
        {
            "ph": "M",
            "name": "thread_name",
            "pid": GPU_PID,
            "tid": COMPUTE_STREAM,
            "args": {"name": "stream 7"},
        },
        {
            "ph": "M",
            "name": "thread_name",
            "pid": GPU_PID,
            "tid": COMM_STREAM,
            "args": {"name": "stream 20"},
        },
        {
            "ph": "M",
            "name": "thread_name",
            "pid": GPU_PID,
            "tid": COPY_STREAM,
            "args": {"name": "stream 21"},
        },
    ):
        out.event(ev)

    gpu: list[dict[str, Any]] = []
    t = BASE_TS
    gpu_free = t  # when the compute stream is next free
    correlation = 100 + rank
    external = 1
    step = 0

    def ns(x: float) -> float:
        return round(x, 3)

    def cpu(name: str, cat: str, ts: float, dur: float, args: dict[str, Any] | None = None) -> None:
        ev = {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": pid,
            "tid": tid,
            "ts": ns(ts),
            "dur": ns(dur),
        }
        if args is not None:
            ev["args"] = args
        out.event(ev)

    def launch(
        ts: float, stream: int, name: str, cat: str, dur: float, after: float, ext: int
    ) -> float:
        """A cudaLaunchKernel at ts and its kernel on ``stream`` no earlier than ``after``."""
        nonlocal correlation
        correlation += 1
        launch_dur = 3.0 + rng.random() * 2
        cpu(
            "cudaLaunchKernel" if cat == "kernel" else "cudaMemcpyAsync",
            "cuda_runtime",
            ts,
            launch_dur,
            {"cbid": 211, "correlation": correlation, "external id": ext},
        )
        out.event(
            {
                "ph": "s",
                "id": correlation,
                "pid": pid,
                "tid": tid,
                "ts": ns(ts),
                "cat": "ac2g",
                "name": "ac2g",
            }
        )
        start = max(ts + launch_dur + 1.0, after) + rng.random() * 2
        gpu.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": GPU_PID,
                "tid": stream,
                "ts": ns(start),
                "dur": ns(dur),
                "args": {
                    "External id": ext,
                    "queued": 0,
                    "device": 0,
                    "context": 1,
                    "stream": stream,
                    "correlation": correlation,
                    "registers per thread": 32,
                    "shared memory": 0,
                    "blocks per SM": 1.2,
                    "grid": [128, 1, 1],
                    "block": [256, 1, 1],
                },
            }
        )
        gpu.append(
            {
                "ph": "f",
                "id": correlation,
                "pid": GPU_PID,
                "tid": stream,
                "ts": ns(start),
                "cat": "ac2g",
                "name": "ac2g",
                "bp": "e",
            }
        )
        return start + dur

    written = 0
    while True:
        step += 1
        step_start = t
        # Host-only time first: the data loader.
        loader = 800 + rng.random() * 400
        cpu(
            "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
            "user_annotation",
            t + 5,
            loader,
        )
        t += loader + 10
        # An op that runs on the CPU: no launch inside it.
        cpu(
            "aten::randperm",
            "cpu_op",
            t,
            120 + rng.random() * 20,
            {"External id": external, "Input Dims": [[], [], [], [], []]},
        )
        external += 1
        t += 150
        # H2D copy of the batch, on the copy stream (it overlaps compute).
        gpu_free_copy = launch(
            t,
            COPY_STREAM,
            "Memcpy HtoD (Pageable -> Device)",
            "gpu_memcpy",
            60 + rng.random() * 10,
            t,
            external,
        )
        t += 8
        for k in range(kernels_per_step):
            op = OPS[k % len(OPS)]
            dur_op = 12 + rng.random() * 6
            cpu(
                op,
                "cpu_op",
                t,
                dur_op,
                {
                    "External id": external,
                    "Input Dims": [[32, 128], [128, 128]],
                    "Input type": ["float", "float"],
                },
            )
            kernel = COMPUTE_KERNELS[k % len(COMPUTE_KERNELS)]
            gpu_free = launch(
                t + 2, COMPUTE_STREAM, kernel, "kernel", 8 + rng.random() * 30, gpu_free, external
            )
            external += 1
            t += dur_op + 1 + rng.random()
            if k == kernels_per_step // 2:
                memset_end = launch(
                    t,
                    COMPUTE_STREAM,
                    "Memset (Device)",
                    "gpu_memset",
                    2.0 + rng.random(),
                    gpu_free,
                    external,
                )
                gpu_free = memset_end
                t += 6
        # Gradient all-reduce, overlapping the last kernels.
        launch(t, COMM_STREAM, NCCL, "kernel", 150 + rng.random() * 50, gpu_free - 120, external)
        t += 8
        # aten::nonzero and aten::item each wait for the device.
        for op in ("aten::nonzero", "aten::item"):
            wait_until = max(gpu_free, gpu_free_copy)
            cpu(
                op,
                "cpu_op",
                t,
                max(wait_until - t, 0) + 20,
                {"External id": external, "Input Dims": [[32]]},
            )
            cpu(
                "cudaStreamSynchronize",
                "cuda_runtime",
                t + 10,
                max(wait_until - t, 0) + 5,
                {"cbid": 131, "correlation": correlation + 1000000, "external id": external},
            )
            external += 1
            t = max(t, wait_until) + 30
        cpu(
            f"ProfilerStep#{step}",
            "user_annotation",
            step_start,
            t - step_start,
            {"External id": external},
        )
        external += 1
        t += 5
        # Kineto writes the GPU activities after the CPU ones, stream by stream per buffer.
        for ev in sorted(gpu, key=lambda e: (e["ts"], e["tid"])):
            out.event(ev)
        gpu = []
        written = (
            out.stream.tell()
            if hasattr(out.stream, "tell") and not path.name.endswith(".gz")
            else 0
        )
        if target_bytes is None and step >= steps:
            break
        if target_bytes is not None and written >= target_bytes:
            break
    out.close()
    return path


def write_traces(folder: str | Path, world: int = 2, **kw: Any) -> list[Path]:
    """One trace per rank in ``folder``, as a distributed job writes them."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return [
        write_trace(folder / f"rank{r}.pt.trace.json", rank=r, world=world, **kw)
        for r in range(world)
    ]
