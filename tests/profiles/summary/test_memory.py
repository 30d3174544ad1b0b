"""Memory does not grow with the trace: the peak on a 50 MB trace is about that on a 10 MB one."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from harness.traces import write_trace
from npulab.profiles.summary import summarise

MB = 1 << 20


def _peak(path: Path) -> tuple[int, dict]:
    tracemalloc.start()
    try:
        summary = summarise(str(path))
        return tracemalloc.get_traced_memory()[1], summary
    finally:
        tracemalloc.stop()


def test_peak_memory_is_flat_from_10_to_50_mb(tmp_path: Path) -> None:
    small = write_trace(tmp_path / "small.json", target_bytes=10 * MB, kernels_per_step=200, seed=1)
    large = write_trace(tmp_path / "large.json", target_bytes=50 * MB, kernels_per_step=200, seed=1)
    assert large.stat().st_size >= 4.5 * small.stat().st_size
    small_peak, small_summary = _peak(small)
    large_peak, large_summary = _peak(large)
    # Five times the events...
    assert large_summary["trace"]["events"] >= 4.5 * small_summary["trace"]["events"]
    # ...and not even 1.5 times the memory; json.load would need ~10x the file.
    assert large_peak < 1.5 * small_peak, (small_peak, large_peak)
    assert large_peak < large.stat().st_size / 2
