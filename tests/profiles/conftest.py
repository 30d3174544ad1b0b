"""Traces for the profiles tests: real torch.profiler traces made on this machine's CPU, an
ascend_pt folder laid out as torch_npu writes it, and a local artifact store to keep them."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.artifacts.conftest import Store, local_store  # noqa: F401 - a fixture used here

# The msprof timeline test fixture and the HCCL event quoted verbatim in
# tests/fixtures/ascend/profiler/README.md (section 2): the shape of a trace_view.json.
ASCEND_TRACE_VIEW = [
    {"name": "process_name", "pid": 1084473760, "tid": 0, "ph": "M", "args": {"name": "Ascend Hardware"}},  # noqa: E501
    {"name": "process_labels", "pid": 1084473760, "tid": 0, "ph": "M", "args": {"labels": "NPU"}},
    {"name": "process_sort_index", "pid": 1084473760, "tid": 0, "ph": "M", "args": {"sort_index": 13}},  # noqa: E501
    {"name": "thread_name", "pid": 1084473760, "tid": 70001, "ph": "M", "args": {"name": "Step Trace(Model ID:1)"}},  # noqa: E501
    {"name": "thread_sort_index", "pid": 1084473760, "tid": 70001, "ph": "M", "args": {"sort_index": 70001}},  # noqa: E501
    {"name": "Reduce_1_0", "pid": 1084473760, "tid": 70001, "ts": "1730943468310229.220", "dur": 2217.88, "ph": "X", "cat": "Reduce", "args": {"Iteration ID": 1, "Reduce End 0": "1730943468312447100", "Reduce Start 0": "1730943468310229220"}},  # noqa: E501
    {"name": "hcom_broadcast__661_0_1", "pid": 5, "tid": 0, "ts": "1723545784535521.354", "dur": 40.3, "args": {"connection_id": 64349, "model id": 4294967295, "data_type": "INT64", "alg_type": "RING-RING", "count": 256}, "ph": "X"},  # noqa: E501
]  # fmt: skip
# The header torch_npu writes (README section 2, the base columns).
KERNEL_DETAILS_HEADER = (
    "Device_id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Num\n"
)


def make_cpu_trace(path: Path, steps: int = 4, width: int = 64) -> Path:
    """A Chrome trace of a few training steps, recorded by torch.profiler on the CPU."""
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=steps - 1)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=schedule,
        record_shapes=True,
        on_trace_ready=lambda done: done.export_chrome_trace(str(path)),
    ) as profiler:
        for _ in range(steps):
            optimizer.zero_grad()
            model(torch.randn(32, width)).pow(2).mean().backward()
            optimizer.step()
            profiler.step()
    assert "ProfilerStep#1" in path.read_text()
    return path


@pytest.fixture(scope="session")
def cpu_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_cpu_trace(tmp_path_factory.mktemp("trace") / "cpu_trace.json")


@pytest.fixture
def profile_store(local_store: Store, settings: Any, tmp_path: Path) -> Store:  # noqa: F811
    """The artifacts in a local directory; the scratch and index cache folders of the test."""
    settings.NPULAB = dict(
        settings.NPULAB,
        PROFILE_WORK_DIR=str(tmp_path / "work"),
        PROFILE_CACHE_DIR=str(tmp_path / "cache"),
    )
    return local_store


def ascend_folder(root: Path, name: str = "host_1234_20250101000000000_ascend_pt") -> Path:
    folder = root / name
    output = folder / "ASCEND_PROFILER_OUTPUT"
    output.mkdir(parents=True)
    (output / "trace_view.json").write_text(json.dumps(ASCEND_TRACE_VIEW))
    (output / "kernel_details.csv").write_text(KERNEL_DETAILS_HEADER)
    (folder / "profiler_info.json").write_text(json.dumps({"config": {}}))
    return folder


def tar_bytes(add: Callable[[tarfile.TarFile], None], compress: bool = True) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz" if compress else "w") as archive:
        add(archive)
    return buffer.getvalue()


def member(archive: tarfile.TarFile, name: str, data: bytes = b"x", **fields: Any) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data) if fields.get("type", tarfile.REGTYPE) == tarfile.REGTYPE else 0
    for key, value in fields.items():
        setattr(info, key, value)
    archive.addfile(info, io.BytesIO(data) if info.size else None)


def gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)
