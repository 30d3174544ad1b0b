"""The summary on the shapes real profiler outputs have and the synthesised ones did not.

Each trace here is built in the layout of a real one (named in its test): torch_npu's
HCCL lanes and tasks, Kineto's order of events, PyTorch 1.8's category names, ROCm's
step annotation. The real outputs they were checked against are listed in
docs/profiles.md ("Checked against real outputs").
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from npulab.profiles.summary import extsort, summarise
from tests.profiles.summary.events import complete, write_trace

PY, HW, HCCL = 100, 200, 300
COMPUTE, COMM = 2, 4


def _meta(pid: int, name: str) -> dict:
    return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}


def _task(pid: int, tid: int, name: str, ts: float, dur: float, task: str | None) -> dict:
    args = {"Task Type": task} if task else {}
    return {
        "ph": "X",
        "name": name,
        "pid": pid,
        "tid": tid,
        "ts": str(ts),
        "dur": dur,
        "args": args,
    }


def _ascend_step(pt: Path, rank: int | None = None) -> Path:
    """One step of a 2-rank data-parallel job's rank, as torch_npu Level1 writes it
    (an Ascend-msinsight test output): compute on stream 2, the allreduce's tasks on the
    HCCL stream 4 (Notify Wait, SDMA), the compute stream waiting on the HCCL stream's event
    meanwhile, and the HCCL process's collective span and its planes' tasks again."""
    events = [
        _meta(PY, "Python"),
        _meta(HW, "Ascend Hardware"),
        _meta(HCCL, "HCCL"),
        complete("cpu_op", "ProfilerStep#50", PY, 1, "1000", 2000),
        _task(HW, COMPUTE, "aclnnMm_MatMulCommon_MatMulV2", 1000, 100, "AI_CORE"),
        _task(HW, COMPUTE, "Conv2D1", 1100, 100, "AI_CORE"),
        _task(HW, COMPUTE, "EVENT_WAIT", 1200, 600, "EVENT_WAIT_SQE"),
        _task(HW, COMM, "Notify Wait", 1200, 500, "Notify Wait"),
        _task(HW, COMM, "SDMA", 1700, 100, "SDMA"),
        _task(HCCL, 7, "hcom_allReduce__868_0_1", 1200, 600, None),
        # Level1's planes: the same tasks once more.
        _task(HCCL, 8, "Notify_Wait", 1200, 500, "Notify_Wait"),
        _task(HCCL, 8, "Memcpy", 1700, 100, "Memcpy"),
        _task(HW, COMPUTE, "aclnnForeachAddListV2_ForeachAddList", 1800, 100, "AI_CORE"),
    ]
    # torch_npu writes trace_view.json as a bare array.
    trace = pt / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    trace.parent.mkdir(parents=True)
    trace.write_text(json.dumps(events))
    if rank is not None:
        (pt / f"profiler_info_{rank}.json").write_text(json.dumps({"config": {}, "rank_id": rank}))
    return trace


def test_hcclstream_tasks_are_communication_counted_once_and_a_wait_is_no_compute(
    tmp_path: Path,
) -> None:
    summary = summarise(str(_ascend_step(tmp_path / "rank0_ascend_pt")))
    [rank] = summary["ranks"]
    # The three AI Core kernels; the 600 µs the compute stream waited is not computation.
    assert rank["compute_us"] == 300
    types = {t["type"]: t for t in summary["kernel_types"]}
    # The allreduce's 600 µs, once, though three lanes show it.
    assert types["COMMUNICATION"]["us"] == 600
    kernels = {k["name"]: k for k in summary["top_kernels"]}
    assert kernels["Notify Wait"]["type"] == "COMMUNICATION"
    assert kernels["EVENT_WAIT"]["type"] == "OTHER"
    assert "Notify_Wait" not in kernels
    assert "Memcpy" not in kernels
    # A wait that dominates kernel time is the communication finding's, not a kernel's.
    assert "kernel" not in {f["kind"] for f in summary["findings"]}


def test_an_ascend_folders_rank_is_its_profiler_info(tmp_path: Path) -> None:
    _ascend_step(tmp_path / "host_1_ascend_pt", rank=1)
    assert [r["rank"] for r in summarise(str(tmp_path / "host_1_ascend_pt"))["ranks"]] == [1]


def test_each_ranks_npu_views_give_findings_naming_the_worst_rank(tmp_path: Path) -> None:
    header = "Device_id,Name,Type,Accelerator Core,Start Time(us),Duration(us)\n"
    for rank, aicpu_us in ((0, 0), (1, 300)):
        pt = tmp_path / f"rank{rank}_ascend_pt"
        _ascend_step(pt, rank=rank)
        rows = "0,MatMul1,MatMul,AI_CORE,1000,300\n"
        if aicpu_us:
            rows += f"0,IndexPut2,IndexPut,AI_CPU,1300,{aicpu_us}\n"
        (pt / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").write_text(header + rows)
    findings = summarise(str(tmp_path))["findings"]
    [aicpu] = [f for f in findings if f["kind"] == "aicpu"]
    assert aicpu["title"] == "AI CPU ops take 50 % of device time"
    assert aicpu["evidence"].startswith("rank1_ascend_pt/kernel_details.csv: 1 AI CPU tasks")


def _kineto_op_then_launches(ops: int) -> list[dict]:
    """Kineto's order: a thread's cpu_op events first, its cuda_runtime events after all of
    them (the launch of each op thousands of events later), then the kernels."""
    events: list[dict] = []
    runtime: list[dict] = []
    kernels: list[dict] = []
    for i in range(ops):
        ts = 10 * i
        events.append(complete("cpu_op", "aten::mm", 1, 1, ts, 8))
        runtime.append(complete("cuda_runtime", "cudaLaunchKernel", 1, 1, ts + 1, 5, correlation=i))
        kernels.append(complete("kernel", "sgemm", 0, 7, ts + 6, 3, stream=7, correlation=i))
    return events + runtime + kernels


@pytest.mark.parametrize("run_records", [extsort.RUN_RECORDS, 500])
def test_launches_written_long_after_their_ops_still_count_as_the_ops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_records: int
) -> None:
    # In memory, and spilled to disk in runs.
    monkeypatch.setattr(extsort, "RUN_RECORDS", run_records)
    summary = summarise(str(write_trace(tmp_path / "t.json", _kineto_op_then_launches(5000))))
    assert summary["fallbacks"] == []
    [mm] = [op for op in summary["top_ops"]["by_total"] if op["name"] == "aten::mm"]
    assert mm["count"] == 5000
    # Each op's 8 µs less its launch's 5.
    assert mm["self_us"] == pytest.approx(5000 * 3)


def test_pytorch_1_8s_category_names(tmp_path: Path) -> None:
    events = [
        complete("Operator", "aten::conv2d", 1, 1, 0, 10),
        complete("Runtime", "cudaLaunchKernel", 1, 1, 2, 3, correlation=1),
        complete("Kernel", "implicit_convolve_sgemm", 0, 7, 6, 3, stream=7, correlation=1),
    ]
    summary = summarise(str(write_trace(tmp_path / "t.json", events)))
    [conv] = summary["top_ops"]["by_total"]
    assert (conv["name"], conv["self_us"]) == ("aten::conv2d", 7)
    assert summary["fallbacks"] == []


def test_rocms_step_annotation_on_the_gpu_is_no_host_step(tmp_path: Path) -> None:
    events = [
        complete("user_annotation", f"ProfilerStep#{n}", 1, 1, 100 * n, 90) for n in (1, 2)
    ] + [
        # ROCm 6.2 writes it without a stream.
        complete("gpu_user_annotation", "ProfilerStep#1", 2, 3, 105, 80)
    ]
    summary = summarise(str(write_trace(tmp_path / "t.json", events)))
    assert [s["name"] for s in summary["steps"]["items"]] == ["ProfilerStep#1", "ProfilerStep#2"]


def test_a_kernel_shorter_than_a_microsecond_takes_no_negative_time(tmp_path: Path) -> None:
    # Kineto's own unit test's H100 trace: every device event under a microsecond.
    events = [
        complete("kernel", "Kernel", 0, 7, 10.749, 0.02, stream=7, correlation=1),
        complete("kernel", "Stream Wait Event", 0, 7, 10.819, 0.01, stream=7, correlation=2),
    ]
    [rank] = summarise(str(write_trace(tmp_path / "t.json", events)))["ranks"]
    assert all(value >= 0 for key, value in rank.items() if key.endswith(("_us", "_pct"))), rank


def test_a_gpu_trace_without_kernels_is_still_a_gpu_trace(tmp_path: Path) -> None:
    events = [complete("cuda_runtime", "cudaLaunchKernel", 1, 1, 0, 3, correlation=1)]
    trace = write_trace(tmp_path / "t.json", events, deviceProperties=[{"id": 0, "name": "A100"}])
    assert summarise(str(trace))["trace"]["device"] == "cuda"
