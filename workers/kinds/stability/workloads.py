"""What keeps a device busy, and the fixed computation its consistency check repeats.

A workload lives on one device. ``step()`` does one iteration and returns the
floating-point operations it did (None where counting them means nothing: a
training step, a user's function); ``probe()`` computes the same fixed-seed
result every time it is called and returns it on the CPU. Standard library
and torch only.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from workers.kinds.stability import CONV, MATMUL, MIXED

TFLOPS, STEPS = "TFLOP/s", "steps/s"
# Sizes for a real accelerator, and for the CPU (a stress test, not a benchmark of it).
DEFAULT_SIZES = {MATMUL: (4096, 512), CONV: (64, 32), MIXED: (512, 128)}
# The check's own sizes: large enough to touch many cores, small enough to cost little.
PROBE_MATMUL = 256


class WorkloadError(RuntimeError):
    """The workload cannot be set up (a user's function that does not import)."""


def default_size(workload: str, on_cpu: bool) -> int:
    sizes = DEFAULT_SIZES.get(workload, DEFAULT_SIZES[MATMUL])
    return sizes[1] if on_cpu else sizes[0]


class Workload:
    unit = TFLOPS

    def __init__(self, torch: Any, device: Any, dtype: Any, size: int, seed: int) -> None:
        self.torch = torch
        self.device = device
        self.dtype = dtype
        self.size = size
        self.seed = seed
        generator = torch.Generator().manual_seed(seed + 1)
        # Built on the CPU from the seed, so every device checks the same numbers.
        a = torch.randn(PROBE_MATMUL, PROBE_MATMUL, generator=generator, dtype=torch.float32)
        b = torch.randn(PROBE_MATMUL, PROBE_MATMUL, generator=generator, dtype=torch.float32)
        self._probe_a = a.to(dtype).to(device)
        self._probe_b = b.to(dtype).to(device)

    def step(self) -> float | None:
        raise NotImplementedError

    def probe(self) -> Any:
        # A chain of products: corruption in any of them reaches the result.
        out = self._probe_a
        for _ in range(4):
            out = self.torch.tanh(out @ self._probe_b)
        return out.detach().cpu()


class MatmulWorkload(Workload):
    def __init__(self, torch: Any, device: Any, dtype: Any, size: int, seed: int) -> None:
        super().__init__(torch, device, dtype, size, seed)
        generator = torch.Generator().manual_seed(seed)
        self.a = torch.randn(size, size, generator=generator).to(dtype).to(device)
        self.b = torch.randn(size, size, generator=generator).to(dtype).to(device)
        self.flops = 2.0 * size**3

    def step(self) -> float | None:
        self.out = self.a @ self.b
        return self.flops


class ConvWorkload(Workload):
    BATCH, CHANNELS = 8, 64

    def __init__(self, torch: Any, device: Any, dtype: Any, size: int, seed: int) -> None:
        super().__init__(torch, device, dtype, size, seed)
        generator = torch.Generator().manual_seed(seed)
        shape = (self.BATCH, self.CHANNELS, size, size)
        self.x = torch.randn(*shape, generator=generator).to(dtype).to(device)
        weight = torch.randn(self.CHANNELS, self.CHANNELS, 3, 3, generator=generator) * 0.05
        self.w = weight.to(dtype).to(device)
        self.flops = 2.0 * self.BATCH * self.CHANNELS * size * size * self.CHANNELS * 9

    def step(self) -> float | None:
        self.out = self.torch.nn.functional.conv2d(self.x, self.w, padding=1)
        return self.flops

    def probe(self) -> Any:
        torch = self.torch
        generator = torch.Generator().manual_seed(self.seed + 1)
        x = torch.randn(2, 16, 16, 16, generator=generator).to(self.dtype).to(self.device)
        w = (torch.randn(16, 16, 3, 3, generator=generator) * 0.1).to(self.dtype).to(self.device)
        out = torch.nn.functional.conv2d(torch.nn.functional.conv2d(x, w, padding=1), w, padding=1)
        return torch.cat([out.flatten(), super().probe().flatten()]).cpu()


class MixedWorkload(Workload):
    """A small transformer's training step: attention, layer norm, GELU, AdamW."""

    unit = STEPS
    BATCH, SEQUENCE, HEADS = 8, 64, 4

    def __init__(self, torch: Any, device: Any, dtype: Any, size: int, seed: int) -> None:
        super().__init__(torch, device, dtype, size, seed)
        nn = torch.nn
        width = max(self.HEADS, size - size % self.HEADS)
        torch.manual_seed(seed)
        layer = nn.TransformerEncoderLayer(
            width, self.HEADS, dim_feedforward=4 * width, dropout=0.0, batch_first=True
        )
        self.model = layer.to(device=device, dtype=dtype)
        self.head = nn.Linear(width, 1).to(device=device, dtype=dtype)
        parameters = list(self.model.parameters()) + list(self.head.parameters())
        self.optimizer = torch.optim.AdamW(parameters, lr=1e-4)
        generator = torch.Generator().manual_seed(seed)
        inputs = torch.randn(self.BATCH, self.SEQUENCE, width, generator=generator)
        self.x = inputs.to(dtype).to(device)
        self.y = torch.randn(self.BATCH, 1, generator=generator).to(dtype).to(device)

    def step(self) -> float | None:
        self.optimizer.zero_grad(set_to_none=True)
        out = self.head(self.model(self.x).mean(dim=1))
        loss = self.torch.nn.functional.mse_loss(out, self.y)
        loss.backward()
        self.optimizer.step()
        return None


class EntryWorkload(Workload):
    """A user's ``package.module:function``, called with (device, dtype) each iteration.

    It may return the FLOPs it did (throughput in TFLOP/s), else throughput is
    in calls per second. The consistency check is the built-in one.
    """

    def __init__(self, torch: Any, device: Any, dtype: Any, size: int, seed: int, entry: str):
        super().__init__(torch, device, dtype, size, seed)
        self.function = resolve_entry(entry)
        self.unit = TFLOPS
        self._counted: bool | None = None

    def step(self) -> float | None:
        result = self.function(self.device, self.dtype)
        flops = (
            result if isinstance(result, (int, float)) and not isinstance(result, bool) else None
        )
        if self._counted is None:
            self._counted = flops is not None
            self.unit = TFLOPS if self._counted else STEPS
        return float(flops) if self._counted and flops is not None else None


def resolve_entry(entry: str) -> Callable[..., Any]:
    module_name, _, function_name = entry.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise WorkloadError(f"cannot import {module_name}: {type(exc).__name__}: {exc}") from exc
    function = getattr(module, function_name, None)
    if not callable(function):
        raise WorkloadError(f"{module_name} has no function {function_name}")
    return function


def build(name: str, torch: Any, device: Any, dtype_name: str, size: int, seed: int) -> Workload:
    """The workload ``name`` (a built-in or module:function) on ``device``."""
    dtype = getattr(torch, dtype_name)
    classes = {MATMUL: MatmulWorkload, CONV: ConvWorkload, MIXED: MixedWorkload}
    if name in classes:
        return classes[name](torch, device, dtype, size, seed)
    return EntryWorkload(torch, device, dtype, size, seed, name)
