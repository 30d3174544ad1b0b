"""Writes tests/fixtures/ascend/profiler/npulab-synth-*_ascend_pt/ (once; the output is committed).

SYNTHESISED, not captured: we have no Ascend card. Every file uses the exact header
strings and layout documented in tests/fixtures/ascend/profiler/README.md (torch_npu
source, user guide tree, msprof fixtures): ``trace_view.json`` as a bare event array with
string timestamps and the ``Python`` / ``CANN`` / ``Ascend Hardware`` / ``HCCL`` /
``Overlap Analysis`` processes, ``torch_to_npu`` flows, ``Task Type`` args; the CSVs with
their header rows; ``communication.json`` keyed by step, collective/p2p, op name.

    .venv/bin/python -m tests.profiles.summary.make_ascend_fixture
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

from tests.paths import ASCEND_FIXTURES

NAME = "npulab-synth-host_4242_20261201120000000_ascend_pt"
BASE = 1723545784535521.354
PY, CANN, HW, HCCL, OVERLAP = 4242, 4243, 4244, 4245, 4246
STREAM = 2
COMM_STREAM = 8

KERNEL_DETAILS = [
    "Step Id",
    "Device_id",
    "Model ID",
    "Task ID",
    "Stream ID",
    "Name",
    "Type",
    "OP State",
    "Accelerator Core",
    "Start Time(us)",
    "Duration(us)",
    "Wait Time(us)",
    "Block Num",
    "Mix Block Num",
    "HF32 Eligible",
    "Input Shapes",
    "Input Data Types",
    "Input Formats",
    "Output Shapes",
    "Output Data Types",
    "Output Formats",
]
OP_STATISTIC = [
    "OP Type",
    "Core Type",
    "Count",
    "Total Time(us)",
    "Min Time(us)",
    "Avg Time(us)",
    "Max Time(us)",
    "Ratio(%)",
]
STEP_TRACE = [
    "Device_id",
    "Step",
    "Computing",
    "Communication(Not Overlapped)",
    "Overlapped",
    "Communication",
    "Free",
    "Stage",
    "Bubble",
    "Communication(Not Overlapped and Exclude Receive)",
    "Preparing",
]

# (torch op, device task name, op type, accelerator core, shapes)
OPS = (
    ("aten::matmul", "aclnnMatmul_MatMulV2_MatMulV2", "MatMulV2", "AI_CORE", '"32,128;128,128"'),
    ("aten::add", "aclnnAdd_AddAiCore_Add", "Add", "AI_VECTOR_CORE", '"32,128;32,128"'),
    ("aten::gelu", "aclnnGelu_GeluAiCore_Gelu", "Gelu", "AI_VECTOR_CORE", '"32,128"'),
    (
        "aten::index_put_",
        "aclnnIndexPutImpl_IndexPutAiCpu_IndexPut",
        "IndexPut",
        "AI_CPU",
        '"32,128;32"',
    ),
    (
        "aten::sum",
        "aclnnReduceSum_ReduceSumAiCore_ReduceSum",
        "ReduceSum",
        "AI_VECTOR_CORE",
        '"32,128"',
    ),
)


def build(root: Path, steps: int = 3, seed: int = 11) -> Path:
    rng = random.Random(seed)
    folder = root / NAME
    out = folder / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True, exist_ok=True)
    events: list[dict] = []
    for pid, label, sort in (
        (PY, "Python", 0),
        (CANN, "CANN", 1),
        (HW, "Ascend Hardware", 2),
        (HCCL, "HCCL", 3),
        (OVERLAP, "Overlap Analysis", 4),
    ):
        events.append(
            {"name": "process_name", "pid": pid, "tid": 0, "ph": "M", "args": {"name": label}}
        )
        events.append(
            {
                "name": "process_sort_index",
                "pid": pid,
                "tid": 0,
                "ph": "M",
                "args": {"sort_index": sort},
            }
        )
    events.append(
        {"name": "process_labels", "pid": HW, "tid": 0, "ph": "M", "args": {"labels": "NPU"}}
    )
    events.append(
        {
            "name": "thread_name",
            "pid": HW,
            "tid": STREAM,
            "ph": "M",
            "args": {"name": f"Stream {STREAM}"},
        }
    )
    events.append(
        {
            "name": "thread_name",
            "pid": HCCL,
            "tid": COMM_STREAM,
            "ph": "M",
            "args": {"name": "Communication"},
        }
    )

    kernel_rows: list[list] = []
    step_rows: list[list] = []
    comm: dict = {}
    per_type: dict[tuple[str, str], list[float]] = {}
    t = BASE
    device_free = t
    flow = 1
    task = 1

    def ts(x: float) -> str:
        return f"{x:.3f}"

    for step in range(1, steps + 1):
        step_start = t
        t += 900 + rng.random() * 100  # the data loader: the NPU has nothing to do
        busy = 0.0
        # A CPU fallback: no flow to the device.
        dur = 300 + rng.random() * 20
        events.append(
            {
                "ph": "X",
                "name": "aten::_ctc_loss",
                "pid": PY,
                "tid": PY,
                "ts": ts(t),
                "dur": round(dur, 3),
                "cat": "cpu_op",
                "args": {"Input Dims": [[50, 32, 20], [32, 30]]},
            }
        )
        t += dur + 5
        for i in range(12):
            op, kernel, kind, core, shapes = OPS[i % len(OPS)]
            op_dur = 25 + rng.random() * 10
            events.append(
                {
                    "ph": "X",
                    "name": op,
                    "pid": PY,
                    "tid": PY,
                    "ts": ts(t),
                    "dur": round(op_dur, 3),
                    "cat": "cpu_op",
                    "args": {"Sequence number": task, "Fwd thread id": 0},
                }
            )
            events.append(
                {
                    "ph": "X",
                    "name": f"AscendCL@aclnn{kind}",
                    "pid": CANN,
                    "tid": PY,
                    "ts": ts(t + 3),
                    "dur": round(op_dur - 6, 3),
                    "args": {"Thread Id": PY, "Mode": "ACL_OP"},
                }
            )
            events.append(
                {
                    "ph": "s",
                    "bp": "e",
                    "name": "torch_to_npu",
                    "id": flow,
                    "pid": PY,
                    "tid": PY,
                    "ts": ts(t + 1),
                    "cat": "async_npu",
                }
            )
            k_dur = (60 if core == "AI_CPU" else 15) + rng.random() * 20
            start = max(t + op_dur, device_free) + 2 + rng.random()
            events.append(
                {
                    "ph": "X",
                    "name": kernel,
                    "pid": HW,
                    "tid": STREAM,
                    "ts": ts(start),
                    "dur": round(k_dur, 3),
                    "args": {
                        "Model Id": 4294967295,
                        "Task Type": core,
                        "Stream Id": STREAM,
                        "Task Id": task,
                        "Batch Id": 0,
                        "Subtask Id": 4294967295,
                        "connection_id": flow,
                    },
                }
            )
            events.append(
                {
                    "ph": "f",
                    "bp": "e",
                    "name": "torch_to_npu",
                    "id": flow,
                    "pid": HW,
                    "tid": STREAM,
                    "ts": ts(start),
                    "cat": "async_npu",
                }
            )
            kernel_rows.append(
                [
                    step,
                    0,
                    4294967295,
                    task,
                    STREAM,
                    kernel,
                    kind,
                    "dynamic",
                    core,
                    ts(start),
                    round(k_dur, 3),
                    round(rng.random(), 3),
                    24,
                    0,
                    "NO",
                    shapes,
                    "DT_FLOAT",
                    "ND",
                    shapes,
                    "DT_FLOAT",
                    "ND",
                ]
            )
            cell = per_type.setdefault((kind, core), [])
            cell.append(round(k_dur, 3))
            device_free = start + k_dur
            busy += k_dur
            flow += 1
            task += 1
            t += op_dur + 2
        # The gradient all-reduce on the communication stream, partly overlapping.
        c_start = device_free - 20
        c_dur = 180 + rng.random() * 40
        name = f"hcom_allReduce__661_{step}_1"
        events.append(
            {
                "ph": "X",
                "name": name,
                "pid": HCCL,
                "tid": COMM_STREAM,
                "ts": ts(c_start),
                "dur": round(c_dur, 3),
                "args": {
                    "connection_id": 64349 + step,
                    "model id": 4294967295,
                    "data_type": "FP32",
                    "alg_type": "RING-RING",
                    "count": 262144,
                },
            }
        )
        kernel_rows.append(
            [
                step,
                0,
                4294967295,
                task,
                COMM_STREAM,
                name,
                "hcom_allReduce_",
                "static",
                "HCCL",
                ts(c_start),
                round(c_dur, 3),
                0,
                0,
                0,
                "NO",
                '"262144"',
                "DT_FLOAT",
                "ND",
                '"262144"',
                "DT_FLOAT",
                "ND",
            ]
        )
        task += 1
        device_free = c_start + c_dur
        # .item() on the loss: a stream synchronisation.
        events.append(
            {
                "ph": "X",
                "name": "aten::item",
                "pid": PY,
                "tid": PY,
                "ts": ts(t),
                "dur": round(device_free - t + 15, 3),
                "cat": "cpu_op",
                "args": {},
            }
        )
        events.append(
            {
                "ph": "X",
                "name": "AscendCL@aclrtSynchronizeStream",
                "pid": CANN,
                "tid": PY,
                "ts": ts(t + 5),
                "dur": round(device_free - t + 5, 3),
                "args": {"Thread Id": PY, "Mode": "ACL_RTS"},
            }
        )
        t = device_free + 20
        events.append(
            {
                "ph": "X",
                "name": f"ProfilerStep#{step}",
                "pid": PY,
                "tid": PY,
                "ts": ts(step_start),
                "dur": round(t - step_start, 3),
                "cat": "cpu_op",
                "args": {},
            }
        )
        computing = busy
        overlapped = 20.0
        comm_us = c_dur
        free = (t - step_start) - computing - (comm_us - overlapped)
        events.append(
            {
                "ph": "X",
                "name": "Free",
                "pid": OVERLAP,
                "tid": 2,
                "ts": ts(step_start),
                "dur": round(free, 3),
            }
        )
        step_rows.append(
            [
                0,
                step,
                round(computing, 3),
                round(comm_us - overlapped, 3),
                overlapped,
                round(comm_us, 3),
                round(free, 3),
                0,
                0,
                round(comm_us - overlapped, 3),
                0,
            ]
        )
        comm[f"step{step}"] = {
            "collective": {
                f"{name}@8455291417349591216": {
                    "Communication Time Info": {
                        "Start Timestamp(us)": c_start,
                        "Elapse Time(ms)": round(c_dur / 1000, 6),
                        "Transit Time(ms)": round(c_dur * 0.6 / 1000, 6),
                        "Wait Time(ms)": round(c_dur * 0.3 / 1000, 6),
                        "Synchronization Time(ms)": round(c_dur * 0.1 / 1000, 6),
                        "Idle Time(ms)": 0.0,
                        "Wait Time Ratio": 0.3333,
                        "Synchronization Time Ratio": 0.1429,
                    },
                    "Communication Bandwidth Info": {
                        "HCCS": {
                            "Transit Size(MB)": 1.048576,
                            "Transit Time(ms)": round(c_dur * 0.6 / 1000, 6),
                            "Bandwidth(GB/s)": 9.1,
                            "Large Packet Ratio": 0.0,
                            "Size Distribution": {"1.048576": [1, round(c_dur * 0.6 / 1000, 6)]},
                        },
                    },
                }
            },
            "p2p": {},
        }
        t += 10

    (out / "trace_view.json").write_text(json.dumps(events, indent=None) + "\n")
    with open(out / "kernel_details.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(KERNEL_DETAILS)
        w.writerows(kernel_rows)
    total = sum(sum(v) for v in per_type.values())
    with open(out / "op_statistic.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(OP_STATISTIC)
        for (kind, core), durs in sorted(per_type.items(), key=lambda kv: -sum(kv[1])):
            w.writerow(
                [
                    kind,
                    core,
                    len(durs),
                    round(sum(durs), 3),
                    min(durs),
                    round(sum(durs) / len(durs), 3),
                    max(durs),
                    round(100 * sum(durs) / total, 2),
                ]
            )
    with open(out / "step_trace_time.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(STEP_TRACE)
        w.writerows(step_rows)
    (out / "communication.json").write_text(json.dumps(comm, indent=1) + "\n")
    (folder / "profiler_info.json").write_text(
        json.dumps(
            {
                "config": {
                    "common_config": {
                        "activities": ["ProfilerActivity.CPU", "ProfilerActivity.NPU"]
                    }
                },
                "start_info": {},
                "end_info": {},
            },
            indent=1,
        )
        + "\n"
    )
    (root / "SYNTHESISED.md").write_text(
        "# Synthesised torch_npu profiler folders\n\n"
        f"`{NAME}/` is NOT captured output: no Ascend card was available.\n"
        "It was written by `tests/profiles/summary/make_ascend_fixture.py` from the exact\n"
        "header strings and the layout documented in `README.md` here (torch_npu source, the\n"
        "profiler user guide, msprof test fixtures): a bare-array `trace_view.json` with string\n"
        "timestamps and the Python / CANN / Ascend Hardware / HCCL / Overlap Analysis\n"
        "processes, `kernel_details.csv`, `op_statistic.csv`, `step_trace_time.csv` and\n"
        "`communication.json`. Replace it with a real capture when one is available.\n"
    )
    return folder


if __name__ == "__main__":
    print(build(ASCEND_FIXTURES / "profiler"))
