"""Whether a silent run's devices are working: the second half of "no progress".

A run that wrote no metric, log or checkpoint event for ``hang_timeout_s`` has hung only
if its devices are idle too: a long graph compile, an evaluation that logs nothing or a
step that takes an hour keep them busy (docs/diagnosis.md). Each device type says how
its activity is read, registered here by type:

- an NPU or a GPU by its compute utilisation, from the host's telemetry (``npu-smi``'s
  AICore usage, ``nvidia-smi``'s SM usage: ``workers.telemetry``), at the moment the
  run has been silent long enough;
- the CPU by the CPU time of the run's own processes between two looks, since the
  host's utilisation counts every other process on it.

A device whose activity cannot be read (the tool is missing, fails) gives no answer, and
silence alone decides, as before telemetry was consulted.
"""

from __future__ import annotations

import os
import time
from typing import Callable, Iterable

from workers import telemetry
from workers.contract.devices import CPU, CUDA, NPU
from workers.diagnosis import collect

# Below this a device counts as idle: a hung collective leaves an NPU's AICore at 0 %,
# a blocked process spends no CPU time.
BUSY_PCT = 5.0
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class Activity:
    """One run's devices: ``look`` on each poll, ``busy`` once the run has been silent."""

    def __init__(self, devices: list[int], groups: Callable[[], Iterable[int]]) -> None:
        self.devices = devices
        self.groups = groups
        # The utilisation the last answer rested on, for the run's log and the diagnosis.
        self.last_pct: float | None = None

    def look(self) -> None:
        """Keep what ``busy`` compares against (cheap: called every second)."""

    def busy(self) -> bool | None:
        """True when the devices compute, False when idle, None when it cannot be told."""
        return None


class UtilisationActivity(Activity):
    """A device whose telemetry reports its compute utilisation."""

    device_type = ""

    def busy(self) -> bool | None:
        samples = telemetry.sample(self.device_type, self.devices or None)
        readings = [
            (sample.get("readings") or {}).get("utilization_pct")
            for sample in samples
            if sample.get("index") is not None
        ]
        known = [float(value) for value in readings if value is not None]
        if not known:
            return None
        self.last_pct = max(known)
        return self.last_pct >= BUSY_PCT


class NpuActivity(UtilisationActivity):
    device_type = NPU


class CudaActivity(UtilisationActivity):
    device_type = CUDA


class ProcessCpuActivity(Activity):
    """The CPU time the run's processes spent since the last look."""

    def __init__(self, devices: list[int], groups: Callable[[], Iterable[int]]) -> None:
        super().__init__(devices, groups)
        self._last: tuple | None = None  # (wall seconds, CPU seconds)
        self._previous: tuple | None = None

    def look(self) -> None:
        self._previous, self._last = self._last, (time.monotonic(), self._cpu_seconds())

    def busy(self) -> bool | None:
        self.look()
        if self._previous is None or self._last is None:
            return None
        wall = self._last[0] - self._previous[0]
        if wall <= 0:
            return None
        # Processes that ended between the looks take their time with them: never negative.
        self.last_pct = max(0.0, (self._last[1] - self._previous[1]) / wall * 100)
        return self.last_pct >= BUSY_PCT

    def _cpu_seconds(self) -> float:
        total = 0
        for pid in collect.processes_in_groups(self.groups()):
            try:
                with open(f"/proc/{pid}/stat", "rb") as handle:
                    stat = handle.read().decode("ascii", errors="replace")
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            # utime and stime, fields 14 and 15 of proc(5), in clock ticks.
            if len(fields) > 12:
                total += int(fields[11]) + int(fields[12])
        return total / _TICKS


ACTIVITIES: dict[str, Callable[[list[int], Callable[[], Iterable[int]]], Activity]] = {}


def register(device_type: str, activity: Callable[..., Activity]) -> None:
    """How the activity of ``device_type`` devices is read (a site may add its own)."""
    ACTIVITIES[device_type] = activity


register(NPU, NpuActivity)
register(CUDA, CudaActivity)
register(CPU, ProcessCpuActivity)


def of(device_type: str, devices: list[int], groups: Callable[[], Iterable[int]]) -> Activity:
    """The activity of a run's devices; one that tells nothing for a type without a reader."""
    return ACTIVITIES.get(device_type, Activity)(devices, groups)
