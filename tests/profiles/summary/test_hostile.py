"""A hostile trace (the user's script wrote it) cannot make the summary's memory or size grow."""

from __future__ import annotations

import json
from pathlib import Path

from npulab.profiles.summary import breakdown, summarise
from tests.profiles.summary.events import write_trace


def test_countless_kernel_names_are_counted_together(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(breakdown, "MAX_NAMES", 10)
    events = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": f"k{i}" + "x" * 2000,
            "pid": 0,
            "tid": 7,
            "ts": i * 10,
            "dur": 5,
            "args": {"stream": 7, "correlation": i},
        }
        for i in range(50)
    ]
    summary = summarise(str(write_trace(tmp_path / "t.json", events)))
    names = [k["name"] for k in summary["top_kernels"]]
    assert "(other COMPUTATION kernels)" in names
    assert len(names) <= 11
    assert max(len(n) for n in names) <= breakdown.MAX_NAME_CHARS
    assert sum(k["count"] for k in summary["top_kernels"]) == 50
    assert summary["ranks"][0]["compute_us"] == 50 * 5


def test_scattered_correlation_ids_turn_the_last_step_filter_off(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(breakdown, "MAX_PAGES", 3)
    events = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": f"ProfilerStep#{s}",
            "pid": 1,
            "tid": 1,
            "ts": s * 1000,
            "dur": 900,
        }
        for s in (1, 2)
    ]
    for i in range(10):
        corr = i << 20  # a page of its own each
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": 1000 + i * 10,
                "dur": 2,
                "args": {"correlation": corr},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": "gemm",
                "pid": 0,
                "tid": 7,
                "ts": 1000 + i * 10 + 3,
                "dur": 5,
                "args": {"stream": 7, "correlation": corr},
            }
        )
    summary = summarise(str(write_trace(tmp_path / "t.json", events)))
    assert summary["trace"]["hta_last_step_excluded"] is False
    assert summary["ranks"][0]["device_events"] == 10


def test_odd_values_are_skipped_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(
        '{"traceEvents": ['
        '{"ph": "M", "name": "process_name", "pid": [1], "args": {"name": "Ascend Hardware"}},'
        '{"ph": "X", "name": "k", "pid": [1], "tid": {"a": 1}, "ts": NaN, "dur": 1},'
        '{"ph": "X", "name": "k", "pid": [1], "tid": 2, "ts": 1, "dur": Infinity},'
        '{"ph": "X", "name": ["aten::add"], "cat": ["cpu_op"], "pid": 1, "tid": [2], '
        '"ts": 1, "dur": 2},'
        '{"ph": "X", "name": "Add", "pid": [1], "tid": 2, "ts": 5, "dur": 3}'
        "]}"
    )
    summary = summarise(str(path))
    assert summary["trace"]["device_events"] == 1
    assert summary["ranks"][0]["kernel_us"] == 3
    json.dumps(summary, allow_nan=False)
