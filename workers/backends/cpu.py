"""The CPU as a device: always there, one device per lease."""

from __future__ import annotations

import platform
from typing import Any

from workers.backends.base import Backend
from workers.contract.devices import CPU, VISIBLE_DEVICES_ENV


def cpu_model_name() -> str:
    """The CPU model as the kernel reports it, else what the platform module knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                # x86 says "model name"; many aarch64 kernels have no such line.
                if key.strip() in ("model name", "Model", "Hardware"):
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


class CpuBackend(Backend):
    name = CPU
    visible_devices_env = VISIBLE_DEVICES_ENV[CPU]
    dist_backend = "gloo"

    def is_available(self) -> bool:
        return True

    def device_count(self) -> int:
        return 1

    def device_name(self, index: int = 0) -> str:
        return cpu_model_name()

    def device(self, index: int = 0) -> Any:
        return self.torch.device("cpu")

    def synchronize(self, index: int | None = None) -> None:
        return None

    def memory_stats(self, index: int = 0) -> dict[str, int]:
        import resource

        # ru_maxrss is in KiB on Linux.
        return {"max_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}

    def amp_dtypes(self) -> tuple[str, ...]:
        return ("bf16",)
