"""What a parity run's script calls: its side, the same inputs on both sides, the dump.

The parity runner starts the script once per side with ``NPULAB_PARITY_*`` set
(``workers.contract.script_env``). A script written for it::

    import torch
    from workers import parity

    parity.seed()                      # the same initial weights on both sides
    model = parity.prepare(build_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(parity.steps()):
        x, y = parity.randn(64, 32), parity.randn(64, 1)
        with parity.probe(model, step), parity.autocast():
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        parity.log_loss(step, loss)

Inputs are drawn on the CPU from one generator seeded by the run, in float32,
then cast and moved: both sides see the same numbers whatever their device or
dtype. ``probe`` dumps step 0 with msprobe's ``PrecisionDebugger`` into the
side's directory. Standard library and torch (msprobe where dumping), Python
3.8; outside a parity run every call works on the CPU in float32, without a dump.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
from typing import Any, Iterator

from workers.contract import script_env

LOSS_FILE = "loss.jsonl"
INT8_FILE = "int8.json"
# The pass that runs the INT8 check, after sides a and b.
INT8_SIDE = "int8"
DUMP_DIR = "dump"
DEFAULT_SEED = 0

_state: dict[str, Any] = {}


def side() -> str:
    """``a`` or ``b``; empty outside a parity run."""
    return os.environ.get(script_env.PARITY_SIDE, "")


def side_dir() -> str:
    """Where this side writes its dump and losses (the working directory outside a run)."""
    return os.environ.get(script_env.PARITY_DIR, "") or os.getcwd()


def dtype_name() -> str:
    return os.environ.get(script_env.PARITY_DTYPE, "float32")


def amp_level() -> str:
    return os.environ.get(script_env.PARITY_AMP_LEVEL, "O0")


def steps() -> int:
    return int(os.environ.get(script_env.PARITY_STEPS, "1"))


def device_type() -> str:
    return os.environ.get(script_env.DEVICE_TYPE, "cpu")


def seed(value: int | None = None) -> int:
    """Seed Python's, numpy's and torch's generators and the inputs' own; returns the seed."""
    import torch

    if value is None:
        value = int(os.environ.get(script_env.SEED, DEFAULT_SEED))
    random.seed(value)
    torch.manual_seed(value)
    with contextlib.suppress(ImportError):
        import numpy

        numpy.random.seed(value)
    generator = torch.Generator(device="cpu")
    generator.manual_seed(value)
    _state["generator"] = generator
    return value


def generator() -> Any:
    """The inputs' generator: on the CPU, so both sides draw the same numbers."""
    if "generator" not in _state:
        seed()
    return _state["generator"]


def device() -> Any:
    import torch

    if device_type() == "cpu":
        return torch.device("cpu")
    from workers.backends import get_backend

    return get_backend(device_type()).device(0)


def torch_dtype() -> Any:
    """The model's dtype on this side: float32 under autocast (O1/O2), else the side's."""
    import torch

    if amp_level() != "O0":
        return torch.float32
    return getattr(torch, dtype_name())


def randn(*shape: int) -> Any:
    """Normal inputs of ``shape``, the same on both sides, in this side's dtype and device."""
    import torch

    values = torch.randn(*shape, generator=generator(), dtype=torch.float32)
    return values.to(device=device(), dtype=torch_dtype())


def randint(high: int, *shape: int) -> Any:
    """Integer inputs (labels, token ids), the same on both sides, on this side's device."""
    import torch

    return torch.randint(high, shape, generator=generator()).to(device())


def prepare(model: Any) -> Any:
    """The model, built in float32 on the CPU after ``seed()``, on this side's device and
    dtype: both sides start from the same weights."""
    return model.to(device=device(), dtype=torch_dtype())


def autocast() -> Any:
    """Autocast to the side's dtype under amp_level O1/O2; nothing under O0."""
    import torch

    if amp_level() == "O0":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device().type, dtype=getattr(torch, dtype_name()))


@contextlib.contextmanager
def probe(model: Any, step: int = 0) -> Iterator[None]:
    """Dump ``model``'s layers (forward and backward) during step 0 in msprobe's format;
    other steps, and a script run outside a parity run, run plainly."""
    task = os.environ.get(script_env.PARITY_DUMP_TASK, "")
    if step != 0 or not task or not side():
        yield
        return
    from msprobe.pytorch import PrecisionDebugger

    config = os.path.join(side_dir(), "msprobe_config.json")
    with open(config, "w") as handle:
        json.dump(
            {
                "task": task,
                "dump_path": os.path.join(side_dir(), DUMP_DIR),
                "rank": [],
                "step": [0],
                "level": os.environ.get(script_env.PARITY_LEVEL, "L1"),
                task: {"scope": [], "list": [], "data_mode": ["all"]},
            },
            handle,
        )
    debugger = PrecisionDebugger(config_path=config)
    debugger.start(model)
    try:
        yield
    finally:
        debugger.stop()
        debugger.step()


def log_loss(step: int, loss: Any) -> None:
    """The step's loss, for loss-curve parity (a tensor or a number)."""
    value = float(loss.detach().float().item() if hasattr(loss, "detach") else loss)
    with open(os.path.join(side_dir(), LOSS_FILE), "a") as handle:
        handle.write(
            json.dumps(
                {
                    "step": int(step),
                    "value": value if math.isfinite(value) else None,
                    "nonfinite": "" if math.isfinite(value) else str(value),
                }
            )
            + "\n"
        )


def int8_check(
    model: Any,
    calibration: list[Any],
    evaluate: Any,
    tolerance: float = 0.01,
) -> dict[str, Any] | None:
    """The INT8 check of a float32 ``model``: runs only in a parity run's ``int8`` pass
    (``int8: true``), where it writes the report the runner reads; None elsewhere.

    ``calibration``: a few input batches drawn with ``randn``/``randint`` or from the run's
    data; ``evaluate(model)``: the task metric, higher is better (accuracy, or a negative
    loss); ``tolerance``: how far below float32 the metric may fall."""
    if side() != INT8_SIDE:
        return None
    from workers.parity.int8 import sensitivity

    report = sensitivity(model, [batch.cpu() for batch in calibration], evaluate, tolerance)
    with open(os.path.join(side_dir(), INT8_FILE), "w") as handle:
        json.dump(report, handle)
    return report
