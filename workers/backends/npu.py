"""Huawei Ascend NPUs through torch_npu.

torch_npu is imported here and nowhere else, and only in ``load``: on a host
without CANN (or without ``set_env.sh`` sourced) the import fails, and that
failure is what a smoke run must report, word for word.
"""

from __future__ import annotations

from typing import Any, Callable

from workers.backends.base import Backend, BackendError
from workers.contract.devices import NPU, VISIBLE_DEVICES_ENV

SET_ENV_HINT = (
    "source the CANN set_env.sh (e.g. /usr/local/Ascend/ascend-toolkit/set_env.sh) "
    "in the shell that starts the worker"
)


class NpuBackend(Backend):
    name = NPU
    visible_devices_env = VISIBLE_DEVICES_ENV[NPU]
    dist_backend = "hccl"

    def load(self) -> None:
        # Newer stacks autoload torch_npu from `import torch`
        # (TORCH_DEVICE_BACKEND_AUTOLOAD), so a missing CANN can already fail here.
        super().load()
        try:
            import torch_npu  # noqa: F401 - registers the npu device with torch
        except Exception as exc:
            message = f"import torch_npu failed: {type(exc).__name__}: {exc}"
            if "cannot open shared object file" in str(exc):
                message += f" (hint: {SET_ENV_HINT})"
            raise BackendError(message) from exc

    def is_available(self) -> bool:
        return bool(self.torch.npu.is_available())

    def device_count(self) -> int:
        return int(self.torch.npu.device_count())

    def device_name(self, index: int = 0) -> str:
        # get_device_name returns the *current* device's SoC name whatever the
        # argument, so make the asked-for device current first.
        self.torch.npu.set_device(index)
        return str(self.torch.npu.get_device_name(index))

    def synchronize(self, index: int | None = None) -> None:
        self.torch.npu.synchronize(index)

    def memory_stats(self, index: int = 0) -> dict[str, int]:
        npu = self.torch.npu
        free, total = npu.mem_get_info(index)
        return {
            "allocated": int(npu.memory_allocated(index)),
            "reserved": int(npu.memory_reserved(index)),
            "max_allocated": int(npu.max_memory_allocated(index)),
            "free": int(free),
            "total": int(total),
        }

    def amp_dtypes(self) -> tuple[str, ...]:
        return ("fp16", "bf16") if self.torch.npu.is_bf16_supported() else ("fp16",)

    def profiler(self, profile: dict[str, Any], out_dir: str, saved: Callable[[], Any]) -> Any:
        """torch_npu's profiler: CPU and NPU activities, its _ExperimentalConfig (profiler
        level, AI Core metrics), each cycle parsed into a ``*_ascend_pt`` folder in ``out_dir``."""
        import torch_npu  # loaded already by ``load``; the profiler lives there

        profiler = torch_npu.profiler
        handler = profiler.tensorboard_trace_handler(out_dir)

        def trace_ready(prof: Any) -> None:
            handler(prof)
            saved()

        options = {
            "profiler_level": getattr(profiler.ProfilerLevel, profile["level"]),
            "aic_metrics": getattr(profiler.AiCMetrics, profile["aic_metrics"]),
        }
        if hasattr(profiler, "ExportType"):  # older torch_npu writes text only, unasked
            options["export_type"] = [profiler.ExportType.Text]
        config = profiler._ExperimentalConfig(**options)
        return profiler.profile(
            activities=[profiler.ProfilerActivity.CPU, profiler.ProfilerActivity.NPU],
            schedule=profiler.schedule(
                wait=profile["wait"],
                warmup=profile["warmup"],
                active=profile["active"],
                repeat=profile["repeat"],
            ),
            on_trace_ready=trace_ready,
            record_shapes=profile["record_shapes"],
            with_stack=profile["with_stack"],
            profile_memory=profile["profile_memory"],
            experimental_config=config,
        )

    def manual_seed(self, seed: int) -> None:
        super().manual_seed(seed)
        self.torch.npu.manual_seed(seed)
