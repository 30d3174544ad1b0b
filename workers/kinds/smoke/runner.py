"""The smoke run: does this device stack work at all?

Three steps, after the checks engineers run by hand on a new Ascend box:
the device is visible, an fp32 matmul on it agrees with the CPU, and a small
Conv2d + LayerNorm + Adam model trains (its loss goes down).
"""

from __future__ import annotations

import time
from typing import Any

from workers.backends import BackendError
from workers.contract.frameworks import MINDSPORE
from workers.kinds.base import Outcome, RunContext, StepFailed, StepRecorder
from workers.kinds.smoke import ms_smoke
from workers.profiling import Window

# fp32 matmul may run in TF32 (CUDA) or HF32 (Ascend) when a user enabled it;
# both keep about 10 mantissa bits, so the check allows that, not worse.
MATMUL_RTOL = 2e-3
TIMED_MATMULS = 3


def run(ctx: RunContext) -> Outcome:
    spec = ctx.spec
    if spec["framework"] == MINDSPORE:
        return ms_smoke.run(ctx)
    steps = StepRecorder(ctx.events)
    summary: dict[str, Any] = {}

    device = steps.run("device", lambda: check_device(ctx))
    summary.update(
        {key: device[key] for key in ("device_name", "device_count", "torch") if key in device}
    )

    matmul = steps.run(
        "matmul", lambda: check_matmul(ctx, spec["matmul_size"], spec["seed"]), ("device",)
    )
    if "gflops" in matmul:
        summary["matmul_gflops"] = matmul["gflops"]

    train = steps.run(
        "train", lambda: check_training(ctx, spec["train_steps"], spec["seed"]), ("device",)
    )
    summary.update(
        {key: train[key] for key in ("loss_first", "loss_last", "steps_per_s") if key in train}
    )
    return steps.outcome(summary)


def check_device(ctx: RunContext) -> dict[str, Any]:
    backend = ctx.backend
    try:
        backend.load()
    except BackendError as exc:
        raise StepFailed(str(exc)) from exc
    detail = backend.describe()
    if not detail["available"]:
        raise StepFailed(f"torch reports no available {backend.name} device", detail)
    count = detail["device_count"]
    if count < 1:
        raise StepFailed(f"torch sees 0 {backend.name} devices", detail)
    detail["device_name"] = backend.device_name(0)
    ctx.say(f"device: {detail['device_name']} ({count} visible), torch {detail['torch']}")
    return detail


def check_matmul(ctx: RunContext, size: int, seed: int) -> dict[str, Any]:
    backend = ctx.backend
    torch = backend.torch
    device = backend.device(0)
    generator = torch.Generator().manual_seed(seed)
    a = torch.randn(size, size, generator=generator)
    b = torch.randn(size, size, generator=generator)
    reference = a.double() @ b.double()

    a_dev, b_dev = a.to(device), b.to(device)
    product = a_dev @ b_dev  # warm-up: kernel selection and allocation happen here
    backend.synchronize()
    started = time.perf_counter()
    for _ in range(TIMED_MATMULS):
        product = a_dev @ b_dev
    backend.synchronize()
    seconds = time.perf_counter() - started

    gflops = 2.0 * size**3 * TIMED_MATMULS / seconds / 1e9
    error = float((product.cpu().double() - reference).abs().max() / reference.abs().max())
    detail = {"size": size, "gflops": round(gflops, 2), "max_rel_error": error}
    ctx.events.metric("matmul/gflops", 0, gflops)
    ctx.say(f"matmul {size}x{size} fp32: {gflops:.1f} GFLOP/s, max relative error {error:.2e}")
    if not error <= MATMUL_RTOL:  # also catches NaN
        raise StepFailed(
            f"device result differs from the CPU: max relative error {error:.3g} > {MATMUL_RTOL}",
            detail,
        )
    return detail


def check_training(ctx: RunContext, train_steps: int, seed: int) -> dict[str, Any]:
    backend = ctx.backend
    torch = backend.torch
    nn = torch.nn
    device = backend.device(0)
    torch.manual_seed(seed)

    class SmokeNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 16, kernel_size=3, padding=1)
            self.norm = nn.LayerNorm(16)
            self.head = nn.Linear(16, 10)

        def forward(self, x: Any) -> Any:
            x = torch.nn.functional.gelu(self.conv(x))
            x = self.norm(x.permute(0, 2, 3, 1))  # LayerNorm over channels
            return self.head(x.mean(dim=(1, 2)))

    model = SmokeNet().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    # One fixed synthetic batch: a model that can learn at all memorises it.
    generator = torch.Generator().manual_seed(seed)
    images = torch.randn(32, 3, 16, 16, generator=generator).to(device)
    labels = torch.randint(0, 10, (32,), generator=generator).to(device)

    losses: list[float] = []
    started = time.perf_counter()
    # The spec's profiling window, if any, records steps of this loop (docs/profiles.md).
    with Window(backend, ctx.spec.get("profile"), ctx.run_dir, ctx.events, ctx.say) as window:
        for step in range(train_steps):
            optimizer.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            loss.backward()
            optimizer.step()
            value = float(loss.item())  # .item() synchronizes, so the timing is honest
            losses.append(value)
            ctx.events.metric("train/loss", step, value)
            window.step()
    seconds = time.perf_counter() - started

    window = max(1, min(5, train_steps // 2))
    first = sum(losses[:window]) / window
    last = sum(losses[-window:]) / window
    steps_per_s = train_steps / seconds
    ctx.events.metric("train/steps_per_s", train_steps, steps_per_s)
    detail = {
        "steps": train_steps,
        "loss_first": round(first, 6),
        "loss_last": round(last, 6),
        "steps_per_s": round(steps_per_s, 2),
    }
    ctx.say(f"training: loss {first:.4f} -> {last:.4f} over {train_steps} steps")
    if not last < first:
        raise StepFailed(f"loss did not decrease: {first:.4f} -> {last:.4f}", detail)
    return detail
