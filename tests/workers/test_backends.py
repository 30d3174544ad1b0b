"""Device backends on their contract. The npu backend is exercised with a stand-in for
torch_npu: the one thing this machine cannot have is an Ascend card."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from tests.paths import ASCEND_FIXTURES
from workers.backends import BACKENDS, BackendError, get_backend
from workers.backends.npu import SET_ENV_HINT


def test_importing_the_backends_imports_no_torch_npu() -> None:
    assert "torch_npu" not in sys.modules
    assert {name: cls.visible_devices_env for name, cls in BACKENDS.items()} == {
        "cpu": None,
        "cuda": "CUDA_VISIBLE_DEVICES",
        "npu": "ASCEND_RT_VISIBLE_DEVICES",
    }
    assert {name: cls.dist_backend for name, cls in BACKENDS.items()} == {
        "cpu": "gloo",
        "cuda": "nccl",
        "npu": "hccl",
    }


def test_unknown_device_type_is_an_error() -> None:
    with pytest.raises(BackendError, match="unknown device type 'tpu'"):
        get_backend("tpu")


def test_cpu_backend_runs_tensors() -> None:
    backend = get_backend("cpu")
    backend.load()
    assert backend.is_available()
    assert backend.device_count() == 1
    assert backend.device_name()  # the CPU model, never empty
    x = torch.ones(2, device=backend.device(0))
    backend.synchronize()
    assert x.sum().item() == 2
    assert backend.memory_stats()["max_rss"] > 0
    assert backend.describe()["dist_backend"] == "gloo"


def test_missing_torch_npu_is_reported_word_for_word(monkeypatch: pytest.MonkeyPatch) -> None:
    # The real message torch_npu raises when CANN's set_env.sh was not sourced.
    sample = ASCEND_FIXTURES / "errors/samples/import-torch_npu-without-CANN_libhccl_ERR00008.txt"
    message = next(
        line.removeprefix("ImportError: ")
        for line in sample.read_text().splitlines()
        if line.startswith("ImportError: libhccl.so") and "Please check" in line
    )

    class Finder:
        def find_spec(self, name: str, path: object = None, target: object = None) -> None:
            if name == "torch_npu":
                raise ImportError(message)

    monkeypatch.setattr(sys, "meta_path", [Finder(), *sys.meta_path])
    backend = get_backend("npu")
    with pytest.raises(BackendError) as caught:
        backend.load()
    assert str(caught.value) == (
        f"import torch_npu failed: ImportError: {message} (hint: {SET_ENV_HINT})"
    )


class FakeNpu:
    """torch.npu as torch_npu registers it, reduced to what the backend calls."""

    def __init__(self) -> None:
        self.current = 0
        self.names = ["Ascend910B3", "Ascend910B4"]

    def is_available(self) -> bool:
        return True

    def device_count(self) -> int:
        return 2

    def set_device(self, index: int) -> None:
        self.current = index

    def get_device_name(self, index: int | None = None) -> str:
        # As in torch_npu: the current device's name, whatever the argument.
        return self.names[self.current]

    def is_bf16_supported(self) -> bool:
        return True

    def mem_get_info(self, index: int) -> tuple[int, int]:
        return (10, 64)

    def memory_allocated(self, index: int) -> int:
        return 1

    memory_reserved = max_memory_allocated = memory_allocated


def test_npu_backend_asks_the_right_device_for_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch_npu", types.ModuleType("torch_npu"))
    monkeypatch.setattr(torch, "npu", FakeNpu(), raising=False)
    backend = get_backend("npu")
    backend.load()
    assert backend.device_count() == 2
    assert backend.device_name(1) == "Ascend910B4"
    assert backend.device_name(0) == "Ascend910B3"
    assert backend.amp_dtypes() == ("fp16", "bf16")
    assert backend.memory_stats(0) == {
        "allocated": 1,
        "reserved": 1,
        "max_allocated": 1,
        "free": 10,
        "total": 64,
    }
