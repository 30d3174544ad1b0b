"""The traces the summary is tested on: torch.profiler's own, and synthesised Kineto CUDA ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.traces import write_traces
from tests.paths import ASCEND_FIXTURES

ASCEND_PT = ASCEND_FIXTURES / "profiler" / "npulab-synth-host_4242_20261201120000000_ascend_pt"
ACTIVE_STEPS = 4


@pytest.fixture(scope="session")
def torch_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real trace: torch.profiler on this CPU, a small MLP, ``ACTIVE_STEPS`` steps."""
    import torch
    from torch import nn
    from torch.profiler import ProfilerActivity, profile, schedule

    path = tmp_path_factory.mktemp("torch") / "cpu.pt.trace.json"
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))

    def ready(prof: profile) -> None:
        prof.export_chrome_trace(str(path))
        # torch's own per-op table of the same events, to check the summary against.
        averages = {
            e.key: {
                "count": e.count,
                "total_us": e.cpu_time_total,
                "self_us": e.self_cpu_time_total,
            }
            for e in prof.key_averages()
        }
        path.with_name("key_averages.json").write_text(json.dumps(averages))

    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        schedule=schedule(wait=0, warmup=1, active=ACTIVE_STEPS, repeat=1),
        on_trace_ready=ready,
    ) as prof:
        for _ in range(1 + ACTIVE_STEPS):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            (loss > 0).nonzero()
            loss.item()
            prof.step()
    assert path.is_file()
    return path


@pytest.fixture(scope="session")
def cuda_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-rank Kineto CUDA job (synthesised, synth.py), one file per rank, as HTA reads it."""
    folder = tmp_path_factory.mktemp("cuda")
    write_traces(folder, world=2, steps=5, kernels_per_step=30)
    return folder
