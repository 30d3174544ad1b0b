"""The INT8 check in-process (torch.ao FX on the CPU), and through a parity run's INT8 pass."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.workers.test_run_cli import run
from workers.parity.int8 import sensitivity


def small_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32),
        torch.nn.ReLU(),
        torch.nn.Linear(32, 32),
        torch.nn.ReLU(),
        torch.nn.Linear(32, 1),
    )


def test_each_layer_alone_the_whole_model_and_the_layers_to_keep_are_reported() -> None:
    model = small_model()
    generator = torch.Generator().manual_seed(1)
    calibration = [torch.randn(32, 16, generator=generator) for _ in range(4)]
    held_in, held_out = (
        torch.randn(128, 16, generator=generator),
        torch.randn(128, 1, generator=generator),
    )

    def metric(candidate: torch.nn.Module) -> float:
        with torch.no_grad():
            return -float(torch.nn.functional.mse_loss(candidate(held_in), held_out))

    report = sensitivity(model, calibration, metric, tolerance=0.5)
    assert [layer["name"] for layer in report["layers"]] == ["0", "2", "4"]
    for layer in report["layers"]:
        assert layer["cosine"] > 0.99
        assert layer["max_abs_err"] > 0  # INT8 is not float32
        assert layer["delta"] == pytest.approx(layer["metric"] - report["fp32_metric"])
    assert report["cosine"] > 0.99
    assert report["keep"] == []  # within half a unit of float32's metric
    assert report["delta_kept"] == report["delta"]

    # A tolerance no INT8 model meets keeps the most harmful layers, at most half of them.
    strict = sensitivity(model, calibration, metric, tolerance=-1.0)
    worst = min(strict["layers"], key=lambda layer: layer["delta"])
    assert strict["keep"] == [worst["name"]]
    assert strict["delta_kept"] != strict["delta"]


def test_a_parity_run_with_int8_reports_it_in_its_summary(tmp_path: Path) -> None:
    pytest.importorskip("msprobe", reason="mindstudio-probe (the parity extra) is not installed")
    spec = {
        "kind": "parity",
        "device_type": "cpu",
        "entry": "builtin:mlp",
        "layers": 3,
        "int8": True,
        "timeout_s": 900,
    }
    code, stderr, events = run(spec, tmp_path / "run")
    assert code == 0, stderr
    int8 = events[-1]["summary"]["int8"]
    assert [layer["name"] for layer in int8["layers"]] == ["0", "2", "4"]
    assert int8["method"] == "torch.ao FX post-training static INT8"
    assert int8["keep"] == []
    assert abs(int8["delta"]) < int8["tolerance"]
