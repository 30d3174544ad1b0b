"""Device telemetry: what a host worker samples and the batches it sends the platform.

One sample is one device (or the host itself, ``index`` None) at one time::

    {"time": 1764600000.0, "index": 0, "health": "OK",
     "readings": {"temperature_c": 41.0, "power_w": 93.1, ...},
     "processes": [{"pid": 1234, "name": "python", "memory_mb": 3010.0}],
     "error": ""}

``readings`` holds only what the device's tool reported: a reading a tool does not
have is absent, never 0. ``error`` is the tool's own failure (dcmi -8005 in a
container), kept so a host page can say why a device has no readings. The names
below are the only reading names; both sides import them from here.
"""

from __future__ import annotations

import math
from typing import Any

# Chip health as npu-smi prints it (``Health`` column, ``-t health``); nvidia-smi and
# the CPU have no such column and report UNKNOWN unless a rule of theirs applies.
HEALTH_OK = "OK"
HEALTH_WARNING = "WARNING"
HEALTH_ALARM = "ALARM"
HEALTH_CRITICAL = "CRITICAL"
HEALTH_UNKNOWN = "UNKNOWN"
HEALTH_STATES = (HEALTH_OK, HEALTH_WARNING, HEALTH_ALARM, HEALTH_CRITICAL, HEALTH_UNKNOWN)


class Reading:
    """A numeric reading: its unit and what it means (the /metrics help text)."""

    def __init__(self, name: str, unit: str, help: str):
        self.name = name
        self.unit = unit
        self.help = help


READINGS = {
    reading.name: reading
    for reading in (
        Reading("temperature_c", "celsius", "Chip temperature."),
        Reading("power_w", "watts", "Power draw."),
        Reading(
            "utilization_pct",
            "percent",
            "Compute utilisation: AICore on an NPU, SM on a GPU, all cores on a CPU.",
        ),
        Reading("aicpu_pct", "percent", "AICPU utilisation (NPU)."),
        Reading(
            "memory_used_mb",
            "megabytes",
            "Device memory in use: HBM on an NPU or GPU, RAM on a CPU.",
        ),
        Reading("memory_total_mb", "megabytes", "Device memory in all."),
        Reading("memory_bandwidth_pct", "percent", "Memory bandwidth utilisation (HBM bandwidth)."),
        Reading("clock_mhz", "megahertz", "Compute clock: AICore frequency, SM clock."),
        Reading("ecc_single_bit_errors", "count", "Correctable (single-bit) ECC errors."),
        Reading("ecc_double_bit_errors", "count", "Uncorrectable (double-bit) ECC errors."),
        Reading(
            "retired_pages",
            "count",
            "Memory pages taken out of use: isolated pages (NPU), retired pages (GPU).",
        ),
        Reading(
            "throttle_reasons",
            "bitmask",
            "Active clock throttle reasons, as nvidia-smi reports them (0: none).",
        ),
        Reading("load_1m", "processes", "One-minute load average (the host)."),
        Reading("process_count", "count", "Processes using the device."),
    )
}

# The interval a host worker samples at unless told otherwise (NPULAB_TELEMETRY_S).
DEFAULT_INTERVAL_S = 10.0
# How often it sends what it sampled (NPULAB_TELEMETRY_SEND_S), and at once when a device's
# health changes. A request costs the platform more than the samples in it (issue 15): a
# fleet of 64 hosts x 8 devices sending every 5 s took 17 % of a core, every 30 s 4.75 %.
DEFAULT_SEND_S = 30.0
# Samples per request at most.
MAX_BATCH = 2000
# The platform refuses longer lists (a process list is for people, not an inventory).
MAX_PROCESSES = 64
MAX_ERROR_CHARS = 500
MAX_INDEX = 1 << 20  # npu-smi NPU ids reach 32800 on a 310P Duo host


class SampleInvalid(ValueError):
    """A sample that breaks the format above; ``field`` names what is wrong."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def validate_sample(sample: Any) -> dict[str, Any]:
    """The sample in its canonical form; SampleInvalid names the first bad field."""
    if not isinstance(sample, dict):
        raise SampleInvalid("sample", "must be an object")
    when = sample.get("time")
    if isinstance(when, bool) or not isinstance(when, (int, float)) or not math.isfinite(when):
        raise SampleInvalid("time", "must be a number of Unix seconds")
    if not 0 <= when < 1e11:
        raise SampleInvalid("time", "is out of range")
    index = sample.get("index")
    if index is not None and (
        isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= MAX_INDEX
    ):
        raise SampleInvalid("index", f"must be null or an integer from 0 to {MAX_INDEX}")
    health = sample.get("health", HEALTH_UNKNOWN) or HEALTH_UNKNOWN
    if health not in HEALTH_STATES:
        raise SampleInvalid("health", "must be one of " + ", ".join(HEALTH_STATES))
    readings = sample.get("readings", {})
    if not isinstance(readings, dict):
        raise SampleInvalid("readings", "must be an object")
    clean: dict[str, float] = {}
    for name, value in readings.items():
        if name not in READINGS:
            raise SampleInvalid(f"readings.{name}", "is not a known reading")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SampleInvalid(f"readings.{name}", "must be a number")
        if not math.isfinite(value) or abs(value) > 1e15:
            raise SampleInvalid(f"readings.{name}", "must be a finite number")
        clean[name] = float(value)
    processes = sample.get("processes", [])
    if not isinstance(processes, list) or len(processes) > MAX_PROCESSES:
        raise SampleInvalid("processes", f"must be a list of at most {MAX_PROCESSES}")
    procs: list[dict[str, Any]] = []
    for process in processes:
        if not isinstance(process, dict):
            raise SampleInvalid("processes", "each must be an object")
        pid = process.get("pid")
        if isinstance(pid, bool) or not isinstance(pid, int) or not 0 <= pid < 1 << 31:
            raise SampleInvalid("processes.pid", "must be a process id")
        name = process.get("name", "")
        memory = process.get("memory_mb")
        if not isinstance(name, str):
            raise SampleInvalid("processes.name", "must be a string")
        if memory is not None and (
            isinstance(memory, bool)
            or not isinstance(memory, (int, float))
            or not math.isfinite(memory)
        ):
            raise SampleInvalid("processes.memory_mb", "must be a number")
        procs.append({"pid": pid, "name": name[:128], "memory_mb": memory})
    error = sample.get("error", "") or ""
    if not isinstance(error, str):
        raise SampleInvalid("error", "must be a string")
    return {
        "time": float(when),
        "index": index,
        "health": health,
        "readings": clean,
        "processes": procs,
        "error": error[:MAX_ERROR_CHARS],
    }


def sample(
    when: float,
    index: int | None,
    health: str = HEALTH_UNKNOWN,
    readings: dict[str, float] | None = None,
    processes: list[dict[str, Any]] | None = None,
    error: str = "",
) -> dict[str, Any]:
    """A sample in the format above, for the samplers to build."""
    return {
        "time": when,
        "index": index,
        "health": health,
        "readings": dict(readings or {}),
        "processes": list(processes or []),
        "error": error,
    }
