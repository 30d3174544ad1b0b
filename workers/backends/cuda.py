"""NVIDIA GPUs through torch.cuda."""

from __future__ import annotations

from typing import Any

from workers.backends.base import Backend
from workers.contract.devices import CUDA, VISIBLE_DEVICES_ENV


class CudaBackend(Backend):
    name = CUDA
    visible_devices_env = VISIBLE_DEVICES_ENV[CUDA]
    dist_backend = "nccl"

    def is_available(self) -> bool:
        return bool(self.torch.cuda.is_available())

    def device_count(self) -> int:
        return int(self.torch.cuda.device_count())

    def device_name(self, index: int = 0) -> str:
        return str(self.torch.cuda.get_device_name(index))

    def synchronize(self, index: int | None = None) -> None:
        self.torch.cuda.synchronize(index)

    def memory_stats(self, index: int = 0) -> dict[str, int]:
        cuda = self.torch.cuda
        free, total = cuda.mem_get_info(index)
        return {
            "allocated": int(cuda.memory_allocated(index)),
            "reserved": int(cuda.memory_reserved(index)),
            "max_allocated": int(cuda.max_memory_allocated(index)),
            "free": int(free),
            "total": int(total),
        }

    def profiler_activities(self) -> list[Any]:
        activity = self.torch.profiler.ProfilerActivity
        return [activity.CPU, activity.CUDA]

    def amp_dtypes(self) -> tuple[str, ...]:
        return ("fp16", "bf16") if self.torch.cuda.is_bf16_supported() else ("fp16",)
