"""Traces to index: a real CPU torch.profiler trace made here, and a generated larger one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.timelines import write_trace
from npulab.profiles import timeline
from npulab.profiles.timeline import build_index
from tests.profiles.timeline.profiles import record_torch_trace


@pytest.fixture(scope="session")
def torch_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What torch.profiler exports for three steps of a small model's training on the CPU."""
    return record_torch_trace(tmp_path_factory.mktemp("torch-trace") / "trace.json")


@pytest.fixture(scope="session")
def torch_index(torch_trace: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return build_index(str(torch_trace), str(tmp_path_factory.mktemp("torch-index")))


@pytest.fixture(scope="session")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A ~4 MB generated trace, its index, and its events with the ids the index gives them
    (the drawable events, numbered from 1 in the file's order)."""
    folder = tmp_path_factory.mktemp("generated")
    trace = write_trace(folder / "trace.json", 4_000_000, seed=11)
    facts = build_index(trace["path"], str(folder / "index"))
    raw = json.loads(Path(trace["path"]).read_text())["traceEvents"]
    drawable = [event for event in raw if event["ph"] == "X"]
    lanes = {(lane["pid"], lane["tid"]): lane["id"] for lane in timeline.lanes(facts["path"])}
    events = [
        {**event, "id": ident, "lane": lanes[(str(event["pid"]), str(event["tid"]))]}
        for ident, event in enumerate(drawable, start=1)
    ]
    return {"trace": trace, "index": facts, "path": facts["path"], "events": events}
