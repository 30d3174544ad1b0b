"""manage.py profile_summary: the stored summary, as text or JSON; exit code 2 on a bad trace."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from npulab.profiles.summary import summarise
from tests.profiles.summary.conftest import ASCEND_PT


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command("profile_summary", *args, stdout=out)
    return out.getvalue()


def test_json_is_exactly_what_summarise_returns(cuda_traces: Path) -> None:
    printed = json.loads(_run(str(cuda_traces), "--json"))
    assert printed == summarise(str(cuda_traces))
    rank = printed["ranks"][0]
    assert {"idle_us", "compute_us", "non_compute_us", "kernel_us"} <= set(rank)
    assert {"type", "us", "pct"} <= set(printed["kernel_types"][0])
    assert {"name", "us", "count"} <= set(printed["top_kernels"][0])


def test_the_table_shows_the_breakdowns_and_findings(cuda_traces: Path) -> None:
    text = _run(str(cuda_traces))
    assert "Device time per rank (HTA temporal breakdown)" in text
    assert "COMPUTATION overlapping COMMUNICATION" in text
    assert "ncclDevKernel_AllReduce" in text
    assert "aten::randperm" in text
    assert "[warning]" in text


def test_the_npu_folder_shows_its_cores(tmp_path: Path) -> None:
    text = _run(str(ASCEND_PT))
    assert "NPU device time by core" in text
    assert "AI CPU" in text


@pytest.mark.parametrize("content", [None, "", '{"traceEvents": [{"ph": ', "not json"])
def test_a_missing_or_invalid_trace_exits_2_with_a_message(
    tmp_path: Path, content: str | None, capsys: pytest.CaptureFixture
) -> None:
    path = tmp_path / "trace.json"
    if content is not None:
        path.write_text(content)
    err = io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("profile_summary", str(path), stderr=err)
    assert exit_info.value.code == 2
    # The file by its name: errors carry no server paths (docs/security.md).
    assert err.getvalue().startswith("profile_summary: trace.json: ")
