"""The NPU backend's profiler on its contract: torch_npu.profiler as documented
(tests/fixtures/ascend/torch_npu-api.md), faked, since this machine has no Ascend card."""

from __future__ import annotations

import os
import sys
import tarfile
import types
from pathlib import Path
from typing import Any

import pytest
import torch

from workers.backends import get_backend
from workers.contract.events import TRACE
from workers.contract.spec import clean_profile
from workers.events import EventWriter, iter_events
from workers.profiling import Window

# Names and values from torch_npu/profiler (torch_npu-api.md, "torch_npu.profiler").
LEVELS = {"Level0": "Level0", "Level1": "Level1", "Level2": "Level2"}
AIC_METRICS = {
    "PipeUtilization": "ACL_AICORE_PIPE_UTILIZATION",
    "ArithmeticUtilization": "ACL_AICORE_ARITHMETIC_UTILIZATION",
    "Memory": "ACL_AICORE_MEMORY_BANDWIDTH",
    "MemoryL0": "ACL_AICORE_L0B_AND_WIDTH",
    "MemoryUB": "ACL_AICORE_MEMORY_UB",
    "ResourceConflictRatio": "ACL_AICORE_RESOURCE_CONFLICT_RATIO",
    "L2Cache": "ACL_AICORE_L2_CACHE",
    "MemoryAccess": "ACL_AICORE_MEMORY_ACCESS",
    "AiCoreNone": "ACL_AICORE_NONE",
}


def fake_torch_npu(calls: dict[str, Any]) -> types.ModuleType:
    """torch_npu with the profiler API the backend uses; a cycle writes an ascend_pt folder."""
    module = types.ModuleType("torch_npu")
    profiler = types.SimpleNamespace()
    profiler.ProfilerActivity = types.SimpleNamespace(CPU="CPU", NPU="NPU")
    profiler.ProfilerLevel = types.SimpleNamespace(**LEVELS)
    profiler.AiCMetrics = types.SimpleNamespace(**AIC_METRICS)
    profiler.ExportType = types.SimpleNamespace(Db="db", Text="text")

    def experimental_config(**options: Any) -> dict[str, Any]:
        calls["experimental_config"] = options
        return {"config": options}

    def schedule(wait: int, active: int, warmup: int = 0, repeat: int = 0, **_: Any) -> Any:
        calls["schedule"] = {"wait": wait, "warmup": warmup, "active": active, "repeat": repeat}
        return calls["schedule"]

    def tensorboard_trace_handler(dir_name: str) -> Any:
        def handler(prof: Any) -> None:
            # {worker_name}_{timestamp}_ascend_pt, as the profiler user guide lays it out.
            folder = Path(dir_name) / f"localhost_{os.getpid()}_2025010100000{prof.saved}_ascend_pt"
            output = folder / "ASCEND_PROFILER_OUTPUT"
            output.mkdir(parents=True)
            (output / "trace_view.json").write_text("[]")
            (output / "kernel_details.csv").write_text("Device_id,Name,Type\n")

        return handler

    class Profile:
        def __init__(self, **options: Any) -> None:
            calls["profile"] = options
            self.options = options
            self.steps = 0
            self.saved = 0

        def start(self) -> None:
            calls["started"] = True

        def step(self) -> None:
            self.steps += 1

        def stop(self) -> None:
            # One cycle recorded by the time the loop stops.
            self.saved += 1
            self.options["on_trace_ready"](self)

    profiler.profile = Profile
    profiler.schedule = schedule
    profiler.tensorboard_trace_handler = tensorboard_trace_handler
    profiler._ExperimentalConfig = experimental_config
    module.profiler = profiler
    return module


class FakeNpu:
    def is_available(self) -> bool:
        return True


def test_an_npu_window_uses_torch_npus_profiler_with_its_experimental_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: dict[str, Any] = {}
    monkeypatch.setitem(sys.modules, "torch_npu", fake_torch_npu(calls))
    monkeypatch.setattr(torch, "npu", FakeNpu(), raising=False)
    backend = get_backend("npu")
    backend.load()
    profile = clean_profile(
        {"wait": 0, "warmup": 1, "active": 2, "profile_memory": True, "aic_metrics": "L2Cache"}
    )
    events = EventWriter(str(tmp_path / "events.jsonl"))
    with Window(backend, profile, str(tmp_path), events) as window:
        for _ in range(3):
            window.step()
    events.close()

    assert calls["profile"]["activities"] == ["CPU", "NPU"]
    assert calls["profile"]["profile_memory"] is True
    assert calls["schedule"] == {"wait": 0, "warmup": 1, "active": 2, "repeat": 1}
    assert calls["experimental_config"] == {
        "profiler_level": "Level1",
        "aic_metrics": "ACL_AICORE_L2_CACHE",
        "export_type": ["text"],
    }
    (event,) = [e for e in iter_events(str(tmp_path / "events.jsonl")) if e["type"] == "artifact"]
    assert event["kind"] == TRACE
    assert event["name"].endswith("_ascend_pt.tar.gz")
    with tarfile.open(event["path"]) as archive:
        names = archive.getnames()
    top = event["name"][: -len(".tar.gz")]
    assert f"{top}/ASCEND_PROFILER_OUTPUT/trace_view.json" in names
    assert all(name.split("/")[0] == top for name in names)
    # The profiler's raw output is gone; only the archive stays.
    assert os.listdir(tmp_path / "profiles") == [event["name"]]
