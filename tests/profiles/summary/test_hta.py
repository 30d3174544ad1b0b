"""The device breakdowns against Holistic Trace Analysis's own numbers on the same traces.

HTA (HolisticTraceAnalysis 0.5.0, a test dependency) reads the Kineto CUDA traces of
synth.py: loading them is the check that they are in the format HTA reads. Times are
whole microseconds on both sides (HTA rounds ns-resolution traces), so they must be
equal; percentages within HTA's own rounding.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.traces import write_trace
from npulab.profiles.summary import extsort, summarise

hta_trace_analysis = pytest.importorskip("hta.trace_analysis")


def _hta(folder: Path) -> tuple[Any, Any, Any]:
    analysis = hta_trace_analysis.TraceAnalysis(trace_dir=str(folder))
    temporal = analysis.get_temporal_breakdown(visualize=False)
    types, kernels = analysis.get_gpu_kernel_breakdown(
        visualize=False, include_memory_kernels=True, num_kernels=1000
    )
    return temporal, types, kernels


def _assert_same_as_hta(folder: Path, summary: dict[str, Any]) -> None:
    temporal, types, kernels = _hta(folder)
    ranks = {r["rank"]: r for r in summary["ranks"]}
    assert sorted(ranks) == sorted(int(r) for r in temporal["rank"])
    for row in temporal.to_dict("records"):
        ours = ranks[int(row["rank"])]
        assert ours["kernel_us"] > 0
        assert ours["idle_us"] == row["idle_time(us)"]
        assert ours["compute_us"] == row["compute_time(us)"]
        assert ours["non_compute_us"] == row["non_compute_time(us)"]
        assert ours["kernel_us"] == row["kernel_time(us)"]
        assert ours["idle_pct"] == pytest.approx(row["idle_time_pctg"], abs=0.006)
        assert ours["compute_pct"] == pytest.approx(row["compute_time_pctg"], abs=0.006)

    theirs = {row["kernel_type"]: row for row in types.to_dict("records") if row["sum"]}
    ours = {row["type"]: row for row in summary["kernel_types"]}
    assert set(ours) == set(theirs)
    assert len(ours) >= 4  # computation, communication, memory and overlaps of them
    for name, row in theirs.items():
        assert ours[name]["us"] == row["sum"], name
        assert ours[name]["pct"] == pytest.approx(row["percentage"], abs=0.051), name

    per_name: dict[str, float] = {}
    for row in kernels.to_dict("records"):
        per_name[row["name"]] = per_name.get(row["name"], 0.0) + row["sum (us)"]
    ours_k = {k["name"]: k["us"] for k in summary["top_kernels"]}
    assert per_name
    assert ours_k == per_name


def test_two_ranks_match_hta_with_the_last_step_left_out(cuda_traces: Path) -> None:
    summary = summarise(str(cuda_traces))
    assert summary["trace"]["hta_last_step_excluded"] is True
    assert summary["trace"]["device"] == "cuda"
    _assert_same_as_hta(cuda_traces, summary)


def test_one_step_gzipped_matches_hta_with_nothing_left_out(tmp_path: Path) -> None:
    # One ProfilerStep only: HTA keeps every kernel.
    write_trace(tmp_path / "rank0.pt.trace.json.gz", steps=1, kernels_per_step=25, seed=3)
    summary = summarise(str(tmp_path))
    assert summary["trace"]["hta_last_step_excluded"] is False
    _assert_same_as_hta(tmp_path, summary)


def test_events_in_any_order_match_hta(tmp_path: Path, cuda_traces: Path) -> None:
    # A trace holds its events in no particular order across threads and streams.
    for source in sorted(cuda_traces.iterdir()):
        data = json.loads(source.read_text())
        random.Random(5).shuffle(data["traceEvents"])
        (tmp_path / source.name).write_text(json.dumps(data))
    summary = summarise(str(tmp_path))
    _assert_same_as_hta(tmp_path, summary)


def test_spilling_to_disk_gives_the_same_numbers(
    cuda_traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = summarise(str(cuda_traces))
    spills = []
    real_spill = extsort.ExternalSort.spill

    def counting_spill(self: extsort.ExternalSort) -> None:
        spills.append(len(self.buffer))
        real_spill(self)

    monkeypatch.setattr(extsort, "RUN_RECORDS", 50)
    monkeypatch.setattr(extsort.ExternalSort, "spill", counting_spill)
    spilled = summarise(str(cuda_traces))
    assert len(spills) >= 4
    assert spilled["ranks"] == expected["ranks"]
    assert spilled["kernel_types"] == expected["kernel_types"]
    assert spilled["top_kernels"] == expected["top_kernels"]
    assert spilled["top_ops"] == expected["top_ops"]
    assert spilled["fallbacks"] == expected["fallbacks"]


def test_kernel_types_use_htas_classification() -> None:
    from hta.utils.utils import get_kernel_type

    from npulab.profiles.summary.kernels import kernel_type

    names = [
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
        "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)",
        "Memcpy HtoD (Pageable -> Device)",
        "Memset (Device)",
        "dma_copy",
        "ampere_sgemm_128x64_tn",
        "void at::native::elementwise_kernel<128, 2>",
        "cudaStreamSync",
        "my_Memcpy_kernel",
        "ProfilerStep#3",
    ]
    for name in names:
        assert kernel_type(name) == get_kernel_type(name), name


def test_cleanup_leaves_no_spill_files(
    cuda_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(extsort, "RUN_RECORDS", 50)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    summarise(str(cuda_traces))
    assert list(tmp_path.iterdir()) == []
    shutil.rmtree(tmp_path, ignore_errors=True)
