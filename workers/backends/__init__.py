"""Device backends: one small module per device type behind one interface.

Importing this package imports no torch: the host worker needs the class
attributes (the visible-devices variable, the distributed backend) without a
torch in its own environment. ``torch_npu`` is imported only by
``NpuBackend.load``.
"""

from __future__ import annotations

from workers.backends.base import Backend, BackendError
from workers.backends.cpu import CpuBackend
from workers.backends.cuda import CudaBackend
from workers.backends.npu import NpuBackend

BACKENDS: dict[str, type[Backend]] = {
    backend.name: backend for backend in (CpuBackend, CudaBackend, NpuBackend)
}


def get_backend(device_type: str) -> Backend:
    """A fresh backend for ``device_type`` (cpu, cuda or npu); nothing is loaded yet."""
    try:
        return BACKENDS[device_type]()
    except KeyError:
        raise BackendError(
            f"unknown device type {device_type!r}; one of: {', '.join(BACKENDS)}"
        ) from None


__all__ = ["BACKENDS", "Backend", "BackendError", "get_backend"]
