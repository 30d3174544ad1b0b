"""The health rules: each a small registered object with its setting and documented default.

A device rule looks at one telemetry sample of one device and at its own
memory of that device (``memory``, a dict kept in ``DeviceHealth.rule_state``
under the rule's name) and answers with a ``Finding``, ``None`` (nothing
wrong) or ``UNCHANGED`` (the sample has nothing to say: a reading the tool
does not report). A host rule looks at the host and its memory of it.
Levels: ``degraded`` (runs are still placed) and ``unhealthy`` (no new run
on the device, or on the host for a host rule); the heartbeat rule's
``offline``. docs/health.md lists the rules, their settings and sources.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from npulab.hosts.models import Host
from workers.contract import telemetry

DEGRADED = "degraded"
UNHEALTHY = "unhealthy"
OFFLINE = "offline"
BAD = "bad"
# Worst last; a host or device is in the worst level among its findings.
LEVELS = ("healthy", DEGRADED, UNHEALTHY, BAD, OFFLINE)


def worst(levels: list[str]) -> str:
    return max(levels, key=LEVELS.index, default="healthy")


@dataclass(frozen=True)
class Finding:
    """What a rule found wrong: its level and a sentence for people."""

    level: str
    detail: str


UNCHANGED = object()


def limit(key: str) -> Any:
    """A rule's threshold from ``settings.NPULAB`` (read each time: tests change it)."""
    return settings.NPULAB[key]


class DeviceRule:
    """A rule over one device's samples. ``settings`` names its NPULAB keys."""

    name = ""
    settings: tuple[str, ...] = ()

    def check(self, sample: dict[str, Any], memory: dict[str, Any]) -> Any:
        raise NotImplementedError


class ChipHealth(DeviceRule):
    """npu-smi's own verdict on the chip: Warning is degraded, Alarm and Critical unhealthy."""

    name = "chip_health"
    LEVEL = {
        telemetry.HEALTH_WARNING: DEGRADED,
        telemetry.HEALTH_ALARM: UNHEALTHY,
        telemetry.HEALTH_CRITICAL: UNHEALTHY,
    }

    def check(self, sample: dict[str, Any], memory: dict[str, Any]) -> Any:
        health = sample.get("health") or telemetry.HEALTH_UNKNOWN
        if health == telemetry.HEALTH_UNKNOWN:
            return UNCHANGED
        level = self.LEVEL.get(health)
        if level is None:
            return None
        return Finding(level, f"chip Health is {health.capitalize()} (npu-smi)")


class Temperature(DeviceRule):
    """Hotter than the limit for N samples in a row: degraded (one hot sample is noise)."""

    name = "temperature"
    settings = ("HEALTH_TEMPERATURE_LIMIT_C", "HEALTH_TEMPERATURE_SAMPLES")

    def check(self, sample: dict[str, Any], memory: dict[str, Any]) -> Any:
        value = sample["readings"].get("temperature_c")
        if value is None:
            return UNCHANGED
        threshold = limit("HEALTH_TEMPERATURE_LIMIT_C")
        memory["hot"] = memory.get("hot", 0) + 1 if value > threshold else 0
        needed = limit("HEALTH_TEMPERATURE_SAMPLES")
        if memory["hot"] < needed:
            return None
        return Finding(
            DEGRADED,
            f"temperature above {threshold} °C for {memory['hot']} samples (now {value:g} °C)",
        )


class CounterIncrease(DeviceRule):
    """A counter (ECC errors, retired pages) that grew since the platform first saw it.

    The baseline is the first value seen, or the value when an operator last
    cleared the device; a counter that went down (the driver reset its
    volatile counts) starts a new baseline. The finding stays until cleared:
    errors that happened do not heal by themselves.
    """

    reading = ""
    increase_setting = ""
    level = DEGRADED
    what = ""

    def check(self, sample: dict[str, Any], memory: dict[str, Any]) -> Any:
        value = sample["readings"].get(self.reading)
        if value is None:
            return UNCHANGED
        value = int(value)
        baseline = memory.get("baseline")
        if baseline is None or value < baseline:
            memory["baseline"] = baseline = value
        memory["last"] = value
        return self.judge(value, value - baseline)

    def judge(self, value: int, increase: int) -> Finding | None:
        needed = limit(self.increase_setting)
        if increase >= needed:
            return Finding(self.level, f"{increase} new {self.what} (now {value})")
        return None


class EccSingleBit(CounterIncrease):
    """Correctable errors are corrected, but a growing count is a chip wearing out: degraded."""

    name = "ecc_single_bit"
    reading = "ecc_single_bit_errors"
    increase_setting = "HEALTH_ECC_SINGLE_BIT_INCREASE"
    settings = (increase_setting,)
    what = "single-bit (correctable) ECC errors"


class EccDoubleBit(CounterIncrease):
    """An uncorrectable error corrupts data: the device is unhealthy from the first one."""

    name = "ecc_double_bit"
    reading = "ecc_double_bit_errors"
    increase_setting = "HEALTH_ECC_DOUBLE_BIT_INCREASE"
    settings = (increase_setting,)
    level = UNHEALTHY
    what = "double-bit (uncorrectable) ECC errors"


class RetiredPages(CounterIncrease):
    """Isolated (NPU) or retired (GPU) pages: new ones or many degrade, too many are unhealthy."""

    name = "retired_pages"
    reading = "retired_pages"
    settings = ("HEALTH_RETIRED_PAGES_DEGRADED", "HEALTH_RETIRED_PAGES_UNHEALTHY")

    def judge(self, value: int, increase: int) -> Finding | None:
        hard = limit("HEALTH_RETIRED_PAGES_UNHEALTHY")
        soft = limit("HEALTH_RETIRED_PAGES_DEGRADED")
        if value >= hard:
            return Finding(UNHEALTHY, f"{value} retired/isolated memory pages (limit {hard})")
        if value >= soft:
            return Finding(DEGRADED, f"{value} retired/isolated memory pages (over {soft})")
        if increase > 0:
            return Finding(DEGRADED, f"{increase} memory pages retired/isolated (now {value})")
        return None


class HostRule:
    """A rule over a host (``memory``: its part of ``HostHealth.rule_state``)."""

    name = ""
    settings: tuple[str, ...] = ()

    def check(self, host: Host, memory: dict[str, Any], now: datetime) -> Finding | None:
        raise NotImplementedError


class Heartbeat(HostRule):
    """No heartbeat from the host worker for longer than the limit: offline."""

    name = "heartbeat"
    settings = ("HEALTH_HEARTBEAT_MAX_AGE_S",)

    def check(self, host: Host, memory: dict[str, Any], now: datetime) -> Finding | None:
        if host.last_heartbeat is None:
            return Finding(OFFLINE, "the host worker has never sent a heartbeat")
        age = (now - host.last_heartbeat).total_seconds()
        max_age = limit("HEALTH_HEARTBEAT_MAX_AGE_S")
        if age > max_age:
            return Finding(OFFLINE, f"no heartbeat for {int(age)} s (limit {max_age} s)")
        return None


class InfrastructureFailures(HostRule):
    """K runs ended by infrastructure causes that blame the host (a failed start ...) in a window.

    The idea is MindCluster's fault frequency: a fault that keeps coming back
    within a time window takes the part out of service. ``memory["failures"]``
    lists ``[time, run id, cause]``, pruned to the window.
    """

    name = "infra_failures"
    settings = ("HEALTH_INFRA_FAILURES", "HEALTH_INFRA_WINDOW_S")
    MAX_KEPT = 50

    def check(self, host: Host, memory: dict[str, Any], now: datetime) -> Finding | None:
        window = limit("HEALTH_INFRA_WINDOW_S")
        cutoff = (now - timedelta(seconds=window)).timestamp()
        failures = [entry for entry in memory.get("failures", []) if entry[0] >= cutoff]
        memory["failures"] = failures[-self.MAX_KEPT :]
        needed = limit("HEALTH_INFRA_FAILURES")
        if len(failures) < needed:
            return None
        runs = ", ".join(f"run {run} {cause}" for _, run, cause in failures[-3:])
        return Finding(
            UNHEALTHY,
            f"{len(failures)} runs ended by infrastructure failures within {window} s ({runs})",
        )

    @staticmethod
    def add(memory: dict[str, Any], when: datetime, run_id: int | None, cause: str) -> None:
        memory.setdefault("failures", []).append([when.timestamp(), run_id, cause])


DEVICE_RULES: dict[str, DeviceRule] = {}
HOST_RULES: dict[str, HostRule] = {}
# Not a rule over samples: a device marked bad (a failed stability run) stays bad until cleared.
MARKED_BAD = "marked_bad"


def register_device_rule(rule: DeviceRule) -> DeviceRule:
    """Add a device rule; a site's own (or a kind's) registers from its AppConfig.ready."""
    DEVICE_RULES[rule.name] = rule
    return rule


def register_host_rule(rule: HostRule) -> HostRule:
    HOST_RULES[rule.name] = rule
    return rule


for _rule in (ChipHealth(), Temperature(), EccSingleBit(), EccDoubleBit(), RetiredPages()):
    register_device_rule(_rule)
for _host_rule in (Heartbeat(), InfrastructureFailures()):
    register_host_rule(_host_rule)
