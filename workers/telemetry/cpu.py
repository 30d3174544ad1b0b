"""The CPU and the host itself: psutil when importable, else /proc and /sys.

Nothing here starts a process: an interval costs a few file reads. The CPU's
utilisation is measured between two calls (the first call has none to report).
"""

from __future__ import annotations

import glob
import os
import threading
from typing import Any

from workers.contract import telemetry as contract

try:  # optional: the worker extra installs it, a bare host may not have it
    import psutil
except ImportError:  # pragma: no cover - depends on the host
    psutil = None  # type: ignore[assignment]

PROC = "/proc"
THERMAL = "/sys/class/thermal"
# Sensor chips (psutil) and thermal zone types (/sys) that are the CPU package.
CPU_SENSORS = ("coretemp", "k10temp", "zenpower", "cpu_thermal", "cpu-thermal", "soc_thermal")
CPU_ZONES = ("x86_pkg_temp", "cpu", "soc", "acpitz")

_lock = threading.Lock()
_last_times: tuple[float, float] | None = None  # (busy, total) jiffies, without psutil
_primed = False


def sample_devices(when: float, indices: list[int] | None) -> list[dict[str, Any]]:
    """The CPU is device 0: utilisation, temperature, RAM."""
    readings = dict(memory_readings())
    utilization = cpu_utilization()
    if utilization is not None:
        readings["utilization_pct"] = utilization
    temperature = cpu_temperature()
    if temperature is not None:
        readings["temperature_c"] = temperature
    wanted = indices if indices is not None else [0]
    return [
        contract.sample(when, index, readings=readings)
        if index == 0
        else contract.sample(when, index, error=f"a CPU host has device 0 only, not {index}")
        for index in wanted
    ]


def host_sample(when: float) -> dict[str, Any]:
    """The host (``index`` None): one-minute load and RAM, on every host type."""
    readings = dict(memory_readings())
    load = load_1m()
    if load is not None:
        readings["load_1m"] = load
    return contract.sample(when, None, readings=readings)


def load_1m() -> float | None:
    try:
        return float(os.getloadavg()[0])
    except (OSError, AttributeError):
        pass
    text = _read(os.path.join(PROC, "loadavg"))
    try:
        return float(text.split()[0]) if text else None
    except ValueError:
        return None


def memory_readings() -> dict[str, float]:
    """RAM in use (total less available, as ``free`` counts it) and in all, in MB."""
    if psutil is not None:
        memory = psutil.virtual_memory()
        return {
            "memory_used_mb": (memory.total - memory.available) / 1048576.0,
            "memory_total_mb": memory.total / 1048576.0,
        }
    return parse_meminfo(_read(os.path.join(PROC, "meminfo")))


def parse_meminfo(text: str) -> dict[str, float]:
    """``/proc/meminfo`` as the two memory readings; {} where it lacks them."""
    kb: dict[str, float] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            kb[name.strip()] = float(parts[0])
    total = kb.get("MemTotal")
    if not total:
        return {}
    available = kb.get("MemAvailable")
    if available is None:  # kernels before 3.14
        available = kb.get("MemFree", 0.0) + kb.get("Buffers", 0.0) + kb.get("Cached", 0.0)
    return {"memory_used_mb": (total - available) / 1024.0, "memory_total_mb": total / 1024.0}


def cpu_utilization() -> float | None:
    """Busy share of all cores since the previous call, in percent; None on the first."""
    global _last_times, _primed
    with _lock:
        if psutil is not None:
            value = psutil.cpu_percent(interval=None)
            if not _primed:
                _primed = True
                return None
            return float(value)
        times = parse_proc_stat(_read(os.path.join(PROC, "stat")))
        if times is None:
            return None
        last, _last_times = _last_times, times
        if last is None or times[1] <= last[1]:
            return None
        return 100.0 * (times[0] - last[0]) / (times[1] - last[1])


def parse_proc_stat(text: str) -> tuple[float, float] | None:
    """(busy, total) jiffies from the ``cpu`` line of ``/proc/stat``."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            values = [float(part) for part in parts[1:] if part.isdigit()]
            if len(values) < 4:
                return None
            idle = values[3] + (values[4] if len(values) > 4 else 0.0)  # idle + iowait
            # guest time is counted in user already.
            total = sum(values[:8])
            return total - idle, total
    return None


def cpu_temperature() -> float | None:
    """The hottest CPU package sensor the kernel offers; None where it offers none."""
    if psutil is not None and hasattr(psutil, "sensors_temperatures"):
        try:
            sensors = psutil.sensors_temperatures()
        except (OSError, RuntimeError):
            sensors = {}
        values = [
            entry.current
            for name, entries in sensors.items()
            if name in CPU_SENSORS
            for entry in entries
            if entry.current is not None
        ]
        if values:
            return float(max(values))
    return thermal_zone_temperature(THERMAL)


def thermal_zone_temperature(root: str) -> float | None:
    """The hottest CPU-like zone under ``root`` (/sys/class/thermal), in °C."""
    values = []
    for zone in glob.glob(os.path.join(root, "thermal_zone*")):
        kind = _read(os.path.join(zone, "type")).strip().lower()
        if not any(kind.startswith(prefix) for prefix in CPU_ZONES):
            continue
        text = _read(os.path.join(zone, "temp")).strip()
        if text.lstrip("-").isdigit():
            values.append(int(text) / 1000.0)  # millidegrees
    return max(values) if values else None


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""
