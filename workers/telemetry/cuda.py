"""NVIDIA GPUs, through ``nvidia-smi --query-gpu`` and ``--query-compute-apps``.

Two calls an interval, both cheap (nvidia-smi answers from the driver in tens of
milliseconds). Values nvidia-smi cannot give (``[N/A]``, ``[Not Supported]``,
``[Unknown Error]``) are left out. A field an older driver does not know makes
nvidia-smi refuse the whole query; it is dropped and the query asked again.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

from workers.contract import telemetry as contract
from workers.telemetry.tools import ToolFailed, run_tool

log = logging.getLogger("workers.telemetry")

TOOL = "nvidia-smi"
TOOL_TIMEOUT_S = 20.0

# (query field, reading); index and uuid come first and are not readings.
FIELDS = (
    ("temperature.gpu", "temperature_c"),
    ("power.draw", "power_w"),
    ("utilization.gpu", "utilization_pct"),
    ("utilization.memory", "memory_bandwidth_pct"),
    ("memory.used", "memory_used_mb"),
    ("memory.total", "memory_total_mb"),
    ("clocks.sm", "clock_mhz"),
    ("ecc.errors.corrected.volatile.total", "ecc_single_bit_errors"),
    ("ecc.errors.uncorrected.volatile.total", "ecc_double_bit_errors"),
    ("retired_pages.single_bit_ecc.count", "retired_pages"),
    ("retired_pages.double_bit.count", "retired_pages"),
    ("clocks_throttle_reasons.active", "throttle_reasons"),
)
APPS_QUERY = "gpu_uuid,pid,process_name,used_memory"
# Throttle reasons that mean the hardware protects itself (HW slowdown, HW thermal
# slowdown, HW power brake), not a clock policy: nvidia-smi -q documents the bits.
HW_SLOWDOWN_MASK = 0x8 | 0x40 | 0x80
_INVALID_FIELD = re.compile(r'Field "([^"]+)" is not a valid field')


def value_of(text: str) -> float | None:
    """A CSV value as a number; None for ``[N/A]``, ``N/A``, ``[Not Supported]`` and the like."""
    text = text.strip()
    if not text or text.startswith("[") or text.upper() == "N/A":
        return None
    try:
        return float(int(text, 16)) if text.lower().startswith("0x") else float(text)
    except ValueError:
        return None


def parse_gpus(text: str, fields: list[str]) -> list[dict[str, Any]]:
    """``--query-gpu=index,uuid,<fields>`` lines as {"index", "uuid", "readings", "health"}."""
    readings_of = dict(FIELDS)
    gpus = []
    for line in text.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 2 + len(fields) or not parts[0].isdigit():
            continue
        readings: dict[str, float] = {}
        for field, raw in zip(fields, parts[2:]):
            value = value_of(raw)
            if value is None:
                continue
            name = readings_of[field]
            # Retired pages are listed by cause; the reading is all of them.
            readings[name] = readings.get(name, 0.0) + value
        gpus.append(
            {
                "index": int(parts[0]),
                "uuid": parts[1],
                "readings": readings,
                "health": health_of(readings),
            }
        )
    return gpus


def health_of(readings: dict[str, float]) -> str:
    """WARNING on uncorrected ECC errors or a hardware slowdown; else UNKNOWN (no such column)."""
    if readings.get("ecc_double_bit_errors", 0) > 0:
        return contract.HEALTH_WARNING
    if int(readings.get("throttle_reasons", 0)) & HW_SLOWDOWN_MASK:
        return contract.HEALTH_WARNING
    return contract.HEALTH_UNKNOWN


def parse_apps(text: str) -> dict[str, list[dict[str, Any]]]:
    """``--query-compute-apps=gpu_uuid,pid,process_name,used_memory`` by GPU uuid."""
    apps: dict[str, list[dict[str, Any]]] = {}
    for line in text.splitlines():
        head = line.split(",", 2)
        if len(head) != 3:
            continue
        uuid, pid = head[0].strip(), head[1].strip()
        # A process name may hold commas; the memory is the last value.
        name, _, memory = head[2].rpartition(",")
        if not pid.isdigit():
            continue
        apps.setdefault(uuid, []).append(
            {"pid": int(pid), "name": name.strip(), "memory_mb": value_of(memory)}
        )
    return apps


class CudaSampler:
    def __init__(self, tool: str = TOOL, timeout_s: float = TOOL_TIMEOUT_S):
        self.tool = tool
        self.timeout_s = timeout_s
        self.fields = [field for field, _ in FIELDS]
        self._lock = threading.Lock()

    def __call__(self, when: float, indices: list[int] | None) -> list[dict[str, Any]]:
        with self._lock:
            try:
                gpus = self._query_gpus()
            except ToolFailed as exc:
                error = f"{self.tool} --query-gpu: {exc}"
                return [contract.sample(when, index, error=error) for index in indices or [0]]
            try:
                apps: dict[str, list[dict[str, Any]]] | None = parse_apps(
                    self._run([f"--query-compute-apps={APPS_QUERY}"])
                )
            except ToolFailed as exc:
                log.debug("%s --query-compute-apps failed: %s", self.tool, exc)
                apps = None
        by_index = {gpu["index"]: gpu for gpu in gpus}
        samples = []
        for index in indices if indices is not None else sorted(by_index):
            gpu = by_index.get(index)
            if gpu is None:
                samples.append(
                    contract.sample(when, index, error=f"{self.tool} lists no GPU {index}")
                )
                continue
            readings = dict(gpu["readings"])
            processes: list[dict[str, Any]] = []
            if apps is not None:
                processes = apps.get(gpu["uuid"], [])
                readings["process_count"] = float(len(processes))
            samples.append(
                contract.sample(
                    when, index, gpu["health"], readings, processes[: contract.MAX_PROCESSES]
                )
            )
        return samples

    def _query_gpus(self) -> list[dict[str, Any]]:
        while True:
            query = ",".join(["index", "uuid", *self.fields])
            try:
                text = self._run([f"--query-gpu={query}"])
            except ToolFailed as exc:
                match = _INVALID_FIELD.search(exc.output)
                if match and match.group(1) in self.fields:
                    log.info("%s does not know %s; asking without it", self.tool, match.group(1))
                    self.fields.remove(match.group(1))
                    continue
                raise
            return parse_gpus(text, self.fields)

    def _run(self, args: list[str]) -> str:
        return run_tool([self.tool, *args, "--format=csv,noheader,nounits"], self.timeout_s)


_DEFAULT = CudaSampler()


def sample_devices(when: float, indices: list[int] | None) -> list[dict[str, Any]]:
    return _DEFAULT(when, indices)
