"""Device telemetry on the host: one contract sample per device, and one for the host.

``sample(device_type, indices)`` is what the host worker's telemetry thread and the
stability runner call. It never raises: a tool that is missing, fails or hangs gives
samples with ``error`` set and no readings (the format is ``workers.contract.telemetry``).
Each device type's module registers its sampler here; standard library only
(psutil when importable), Python 3.8.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Dict, List, Optional

from workers.contract import telemetry as contract
from workers.contract.devices import CPU, CUDA, NPU
from workers.telemetry import cpu, cuda, npu

log = logging.getLogger("workers.telemetry")

# (time, indices or None for all) -> one sample per device.
Sampler = Callable[[float, Optional[List[int]]], List[Dict[str, Any]]]
SAMPLERS: dict[str, Sampler] = {}


def register(device_type: str, sampler: Sampler) -> None:
    """Make ``sampler`` the one for ``device_type`` (a site may replace a built-in one)."""
    SAMPLERS[device_type] = sampler


def sample(device_type: str, indices: list[int] | None = None) -> list[dict[str, Any]]:
    """One sample per device of ``device_type`` (``indices``: only those), then the host's.

    NPU indices are logic ids (``npu:N``, what the host worker registers), CUDA
    ones nvidia-smi's; a CPU host has device 0. The last sample (``index`` None)
    holds the host's load and memory, whatever the device type. Never raises.
    """
    when = time.time()
    wanted = list(indices) if indices is not None else None
    sampler = SAMPLERS.get(device_type)
    samples: list[dict[str, Any]]
    if sampler is None:
        error = f"no telemetry for device type {device_type!r}"
        samples = [contract.sample(when, index, error=error) for index in wanted or []]
    else:
        try:
            samples = sampler(when, wanted)
        except Exception as exc:  # a sampler's bug must not take the worker down
            log.exception("%s telemetry failed", device_type)
            error = f"telemetry failed: {type(exc).__name__}: {exc}"
            samples = [contract.sample(when, index, error=error) for index in wanted or [0]]
    try:
        samples.append(cpu.host_sample(when))
    except Exception as exc:  # same reason
        log.exception("host telemetry failed")
        samples.append(contract.sample(when, None, error=f"telemetry failed: {exc}"))
    return samples


register(CPU, cpu.sample_devices)
register(CUDA, cuda.sample_devices)
register(NPU, npu.sample_devices)
