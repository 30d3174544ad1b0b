"""The interface every device backend implements."""

from __future__ import annotations

import os
from typing import Any, Callable


class BackendError(RuntimeError):
    """The device stack cannot be used; the message is what the user must see."""


class Backend:
    """What a runner needs to know about one device type.

    ``load`` imports the framework and raises BackendError with the exact
    text of what went wrong (a missing CANN shows up here). Every other
    method may be called only after ``load`` succeeded.
    """

    name = ""
    # Variable the host worker sets from the run's device lease; None where
    # devices cannot be hidden (the CPU).
    visible_devices_env: str | None = None
    dist_backend = "gloo"

    def __init__(self) -> None:
        self.torch: Any = None

    def load(self) -> None:
        try:
            import torch
        except Exception as exc:  # an ImportError, or whatever a broken build raises
            raise BackendError(f"import torch failed: {type(exc).__name__}: {exc}") from exc
        self.torch = torch

    def is_available(self) -> bool:
        raise NotImplementedError

    def device_count(self) -> int:
        raise NotImplementedError

    def device_name(self, index: int = 0) -> str:
        raise NotImplementedError

    def device(self, index: int = 0) -> Any:
        return self.torch.device(self.name, index)

    def synchronize(self, index: int | None = None) -> None:
        raise NotImplementedError

    def memory_stats(self, index: int = 0) -> dict[str, int]:
        """Bytes allocated / reserved / peak, and free / total where the device says."""
        raise NotImplementedError

    def amp_dtypes(self) -> tuple[str, ...]:
        """Reduced precisions autocast supports here: a subset of ("fp16", "bf16")."""
        raise NotImplementedError

    def profiler_activities(self) -> list[Any]:
        """What torch.profiler records here: the CPU, and the device where it has one."""
        return [self.torch.profiler.ProfilerActivity.CPU]

    def profiler(self, profile: dict[str, Any], out_dir: str, saved: Callable[[], Any]) -> Any:
        """A torch profiler (not started) over the window ``profile`` (a clean spec ``profile``).

        Each recorded cycle is written into ``out_dir`` (a Chrome trace ``trace-<n>.json``
        here), then ``saved`` is called. An NPU writes its ``*_ascend_pt`` folder instead.
        """
        profiler = self.torch.profiler
        cycles = [0]

        def trace_ready(prof: Any) -> None:
            cycles[0] += 1
            prof.export_chrome_trace(os.path.join(out_dir, f"trace-{cycles[0]}.json"))
            saved()

        return profiler.profile(
            activities=self.profiler_activities(),
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
        )

    def manual_seed(self, seed: int) -> None:
        self.torch.manual_seed(seed)

    def describe(self) -> dict[str, Any]:
        """What a run records about the device stack it used."""
        available = self.is_available()
        info: dict[str, Any] = {
            "backend": self.name,
            "torch": getattr(self.torch, "__version__", None),
            "available": available,
            "device_count": self.device_count() if available else 0,
            "dist_backend": self.dist_backend,
            "visible_devices_env": self.visible_devices_env,
        }
        if available:
            # Asking an absent device what it supports can raise.
            info["amp_dtypes"] = list(self.amp_dtypes())
        return info
