"""The smoke run on MindSpore: ``mindspore.run_check()``, then a few training steps.

Runs in the run's interpreter, which must have MindSpore (the host's MindSpore
interpreter for a ``framework: mindspore`` smoke). Two steps: ``run_check`` (MindSpore's
own installation check: a multiplication on the device target) and ``train`` (a small
Dense network, a few SGD steps through ``value_and_grad``; the loss must go down).
"""

from __future__ import annotations

import contextlib
import io
import math
import time
from typing import Any

from workers.contract import frameworks
from workers.kinds.base import Outcome, RunContext, StepFailed, StepRecorder

TRAIN_STEPS = 5
# What run_check prints when its multiplication on the device target was right.
RUN_CHECK_PASSED = "installed on platform"


def run(ctx: RunContext) -> Outcome:
    steps = StepRecorder(ctx.events)
    summary: dict[str, Any] = {}
    check = steps.run("run_check", lambda: run_check(ctx))
    summary.update({key: check[key] for key in ("mindspore", "device_target") if key in check})
    train = steps.run("train", lambda: train_steps(ctx), ("run_check",))
    summary.update({key: train[key] for key in ("loss_first", "loss_last") if key in train})
    return steps.outcome(summary)


def _mindspore() -> Any:
    try:
        import mindspore
    except ImportError as exc:
        raise StepFailed(f"the run's interpreter has no MindSpore ({exc})") from None
    return mindspore


def run_check(ctx: RunContext) -> dict[str, Any]:
    mindspore = _mindspore()
    target = frameworks.device_target(ctx.spec["device_type"])
    mindspore.set_device(target)
    output = io.StringIO()
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        mindspore.run_check()
    text = output.getvalue().strip()
    for line in text.splitlines():
        ctx.say(f"run_check: {line}")
    detail = {"mindspore": mindspore.__version__, "device_target": target}
    if RUN_CHECK_PASSED not in text:
        raise StepFailed(f"run_check failed: {text.splitlines()[-1] if text else 'no output'}")
    return detail


def train_steps(ctx: RunContext) -> dict[str, Any]:
    mindspore = _mindspore()
    import numpy as np
    from mindspore import nn

    mindspore.set_seed(ctx.spec["seed"])
    rng = np.random.RandomState(ctx.spec["seed"])
    x = mindspore.Tensor(rng.randn(32, 8).astype(np.float32))
    y = mindspore.Tensor((rng.randn(32, 8).sum(axis=1, keepdims=True) > 0).astype(np.float32))
    net = nn.SequentialCell(nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 1))
    optimizer = nn.SGD(net.trainable_params(), learning_rate=0.1)
    loss_fn = nn.MSELoss()

    def forward(data: Any, label: Any) -> Any:
        return loss_fn(net(data), label)

    grad_fn = mindspore.value_and_grad(forward, None, optimizer.parameters)
    losses = []
    started = time.perf_counter()
    for step in range(TRAIN_STEPS):
        loss, grads = grad_fn(x, y)
        optimizer(grads)
        losses.append(float(loss.asnumpy()))
        ctx.events.metric("loss", step, losses[-1])
    detail = {
        "loss_first": losses[0],
        "loss_last": losses[-1],
        "seconds": time.perf_counter() - started,
    }
    if not all(math.isfinite(loss) for loss in losses):
        raise StepFailed(f"the loss is not finite: {losses}", detail)
    if losses[-1] >= losses[0]:
        raise StepFailed(f"the loss did not go down in {TRAIN_STEPS} steps: {losses}", detail)
    return detail
