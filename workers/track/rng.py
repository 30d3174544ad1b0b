"""Random number generator states, so a resumed run draws what the lost one would have."""

from __future__ import annotations

import random
from typing import Any


def capture(torch: Any) -> dict[str, Any]:
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    numpy = _numpy()
    if numpy is not None:
        state["numpy"] = numpy.random.get_state()
    device = _device_module(torch)
    if device is not None:
        name, module = device
        state[name] = module.get_rng_state_all()
    return state


def restore(state: dict[str, Any], torch: Any) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    numpy = _numpy()
    if numpy is not None and "numpy" in state:
        numpy.random.set_state(state["numpy"])
    device = _device_module(torch)
    if device is not None and device[0] in state:
        name, module = device
        states = state[name]
        # A run resumed on fewer devices restores the ones it has.
        module.set_rng_state_all(states[: module.device_count()])


def _numpy() -> Any:
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def _device_module(torch: Any) -> tuple[str, Any] | None:
    """torch.cuda or torch.npu when that device is in use here."""
    for name in ("npu", "cuda"):
        module = getattr(torch, name, None)
        if module is not None and _available(module):
            return name, module
    return None


def _available(module: Any) -> bool:
    try:
        return bool(module.is_available())
    except Exception:  # a half-installed stack must not cost the checkpoint
        return False
