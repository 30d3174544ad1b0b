"""summarise() on a real torch.profiler trace, the synthesised CUDA job and the NPU folder."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from npulab.profiles.summary import SUMMARY_VERSION, ops, summarise
from tests.profiles.summary.conftest import ACTIVE_STEPS, ASCEND_PT

KEYS = {
    "version",
    "trace",
    "ranks",
    "kernel_types",
    "top_kernels",
    "top_ops",
    "steps",
    "syncs",
    "fallbacks",
    "npu",
    "findings",
}


def _names(rows: list[dict]) -> list[str]:
    return [row["name"] for row in rows]


def test_a_cpu_trace_has_its_ops_with_shapes_steps_and_no_device_numbers(torch_trace: Path) -> None:
    summary = summarise(str(torch_trace))
    assert set(summary) == KEYS
    assert summary["version"] == SUMMARY_VERSION
    assert summary["trace"]["format"] == "kineto"
    assert summary["trace"]["device"] == "cpu"
    assert json.loads(json.dumps(summary)) == summary  # JSON-ready as it is

    assert summary["steps"]["count"] == ACTIVE_STEPS
    assert [s["step"] for s in summary["steps"]["items"]] == sorted(
        s["step"] for s in summary["steps"]["items"]
    )
    by_total = summary["top_ops"]["by_total"]
    addmm = [o for o in by_total + summary["top_ops"]["by_self"] if o["name"] == "aten::addmm"]
    assert addmm
    assert all(o["shapes"].startswith("[[") for o in addmm)
    for row in by_total:
        assert 0 <= row["self_us"] <= row["total_us"] + 1e-6
        assert row["count"] >= 1
    linear = next(o for o in by_total if o["name"] == "aten::linear")
    assert linear["self_us"] < linear["total_us"]  # its addmm is a child
    counts = summary["top_ops"]["by_count"]
    assert [o["count"] for o in counts] == sorted((o["count"] for o in counts), reverse=True)

    syncs = {s["name"]: s for s in summary["syncs"]}
    assert syncs["aten::item"]["count"] == ACTIVE_STEPS
    assert syncs["aten::nonzero"]["per_step"] == 1
    # A CPU run: no device, so no device numbers, fallbacks, or sync findings.
    assert summary["ranks"][0]["kernel_us"] == 0
    assert summary["kernel_types"] == []
    assert summary["top_kernels"] == []
    assert summary["fallbacks"] == []
    assert not [f for f in summary["findings"] if f["kind"] in ("sync", "fallback", "idle")]


def test_op_counts_total_and_self_times_are_torchs_own(
    torch_trace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # torch.profiler's key_averages() of the same profile, computed by torch from its events.
    averages = json.loads(torch_trace.with_name("key_averages.json").read_text())
    monkeypatch.setattr(ops, "TOP", 100_000)
    ours: dict[str, dict[str, float]] = {}
    for row in summarise(str(torch_trace))["top_ops"]["by_total"]:
        mine = ours.setdefault(row["name"], {"count": 0, "total_us": 0.0, "self_us": 0.0})
        for key in mine:
            mine[key] += row[key]
    assert len(ours) >= 20
    assert set(ours) <= set(averages)
    for name, mine in ours.items():
        assert mine["count"] == averages[name]["count"], name
        assert mine["total_us"] == pytest.approx(averages[name]["total_us"], abs=0.01), name
        assert mine["self_us"] == pytest.approx(averages[name]["self_us"], abs=0.01), name


def test_the_same_summary_from_the_gzipped_trace(torch_trace: Path, tmp_path: Path) -> None:
    packed = tmp_path / "cpu.pt.trace.json.gz"
    packed.write_bytes(gzip.compress(torch_trace.read_bytes()))
    plain, zipped = summarise(str(torch_trace)), summarise(str(packed))
    for key in KEYS - {"trace", "ranks"}:
        assert plain[key] == zipped[key], key
    assert [dict(r, file="") for r in plain["ranks"]] == [dict(r, file="") for r in zipped["ranks"]]


def test_the_cuda_job_has_its_findings_each_with_a_place(cuda_traces: Path) -> None:
    summary = summarise(str(cuda_traces))
    kinds = {f["kind"]: f for f in summary["findings"]}
    assert {"idle", "sync", "fallback"} <= set(kinds)
    assert "between steps" in kinds["idle"]["title"]
    nonzero = next(f for f in summary["findings"] if "aten::nonzero" in f["title"])
    assert "once per step" in nonzero["title"]
    assert "aten::randperm" in kinds["fallback"]["evidence"]
    start, end = summary["trace"]["start_us"], summary["trace"]["end_us"]
    for finding in summary["findings"]:
        assert start <= finding["ts_us"] <= end
        assert finding["dur_us"] > 0
        assert finding["lane"] is None or set(finding["lane"]) == {"pid", "tid"}
    assert _names(summary["fallbacks"]) == ["aten::randperm"]
    steps = summary["steps"]["items"]
    # The last step is left out of the device numbers, as HTA does.
    assert all(0 < s["device_busy_us"] < s["dur_us"] for s in steps[:-1])
    assert steps[-1]["device_busy_us"] is None
    assert summary["ranks"][0]["steps"] == len(steps) - 1
    assert summary["steps"]["median_us"] > 0


def test_the_npu_folder_has_its_csv_views_and_device_breakdown(tmp_path: Path) -> None:
    summary = summarise(str(ASCEND_PT))
    assert summary["trace"]["format"] == "ascend"
    assert summary["trace"]["device"] == "npu"
    npu = summary["npu"]
    assert npu["missing"] == []
    cores = {c["core"]: c for c in npu["kernel_details"]["by_core"]}
    assert set(cores) == {"AI Core", "AI CPU", "Communication"}
    assert sum(c["count"] for c in cores.values()) == npu["kernel_details"]["kernels"]
    assert npu["op_statistic"][0]["type"] == "IndexPut"
    st = npu["step_trace_time"]
    assert st["count"] == 3
    assert st["computing_pct"] + st["communication_pct"] + st["free_pct"] == pytest.approx(
        100, abs=0.05
    )
    assert npu["communication"]["ops"][0]["op"] == "allReduce"
    # From the trace itself: device lanes by process name, string timestamps.
    rank = summary["ranks"][0]
    assert rank["kernel_us"] > 0
    assert rank["compute_us"] > 0
    assert rank["non_compute_us"] > 0
    assert {t["type"] for t in summary["kernel_types"]} >= {"COMPUTATION", "COMMUNICATION"}
    assert "aclrtSynchronizeStream" in _names(summary["syncs"])
    assert _names(summary["fallbacks"]) == ["aten::_ctc_loss"]
    kinds = {f["kind"] for f in summary["findings"]}
    assert {"idle", "aicpu", "fallback", "sync"} <= kinds
    # The same through the trace file alone, minus the folder's CSVs.
    alone = tmp_path / "trace_view.json"
    shutil.copy(ASCEND_PT / "ASCEND_PROFILER_OUTPUT" / "trace_view.json", alone)
    only = summarise(str(alone))
    assert only["npu"] is None
    assert only["ranks"] == summary["ranks"]


def test_a_missing_csv_is_named_and_the_rest_is_read(tmp_path: Path) -> None:
    folder = tmp_path / ASCEND_PT.name
    shutil.copytree(ASCEND_PT, folder)
    (folder / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv").unlink()
    (folder / "ASCEND_PROFILER_OUTPUT" / "communication.json").write_text("{not json")
    npu = summarise(str(folder))["npu"]
    assert npu["missing"] == ["op_statistic.csv"]
    assert "unreadable" in npu["communication"]["error"]
    assert npu["kernel_details"]["kernels"] > 0
