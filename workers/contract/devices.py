"""Device types, and the variable that hides every device but the leased ones."""

from __future__ import annotations

CPU, CUDA, NPU = "cpu", "cuda", "npu"
DEVICE_TYPES = (CPU, CUDA, NPU)
# The host worker sets it from the run's device lease; the CPU has none.
VISIBLE_DEVICES_ENV = {
    CPU: None,
    CUDA: "CUDA_VISIBLE_DEVICES",
    NPU: "ASCEND_RT_VISIBLE_DEVICES",
}
DEVICE_TYPE_LABELS = {CPU: "CPU", CUDA: "CUDA GPU", NPU: "Ascend NPU"}
MAX_DEVICES = 64
