"""The stability kind: do the devices stay correct and fast for hours under load?

The runner keeps every leased device busy with a workload and, every
interval, records each device's throughput, its telemetry and a consistency
check: a fixed-seed computation whose result must equal the first interval's
(and, with several devices, device 0's). The verdict (pass / warn / fail with
its reasons) is in the result's summary; a fail marks the device bad on the
platform. Standard library and ``workers.contract`` only, Python 3.8: the
platform imports this to validate submissions.
"""

from __future__ import annotations

import math
from typing import Any

from workers.contract.entries import BUILTIN_PREFIX
from workers.contract.events import EventType
from workers.contract.exits import Cause
from workers.contract.kinds import Kind
from workers.contract.spec import Field, common_fields

STABILITY = "stability"
INTERVAL = "interval"

# The dcgmi-like levels: (duration_s, interval_s).
PRESETS = {
    "quick": (60.0, 5.0),
    "medium": (15 * 60.0, 30.0),
    "long": (4 * 3600.0, 60.0),
}
DEFAULT_PRESET = "quick"

MATMUL, CONV, MIXED = "matmul", "conv", "mixed"
WORKLOADS = (MATMUL, CONV, MIXED)
DTYPES = ("float32", "float16", "bfloat16", "float64")

# Consistency outcomes of one device in one interval.
MATCH = "match"  # bitwise equal to the reference
CLOSE = "close"  # not bitwise equal, within the tolerance (a non-deterministic op)
MISMATCH = "mismatch"  # silent data corruption
ERROR = "error"  # the device failed while working or checking
CONSISTENCY = (MATCH, CLOSE, MISMATCH, ERROR)

PASS, WARN, FAIL = "pass", "warn", "fail"
VERDICTS = (PASS, WARN, FAIL)

# Exit causes of a failed verdict.
CONSISTENCY_MISMATCH = "consistency_mismatch"
DEVICE_FAULT = "device_fault"
THROUGHPUT_DROP = "throughput_drop"

# Intervals at the start whose throughput is the reference for a drop.
BASELINE_INTERVALS = 2
# The intervals must end before timeout_s: room for torch's import and the last check.
TIMEOUT_MARGIN_S = 120
MAX_INTERVALS = 100000
# Fault injection (a test facility, docs/stability.md): the spec's ``faults``, and this
# variable for a run by hand.
FAULTS_ENV = "NPULAB_STABILITY_FAULTS"


# -- fault injection: a test facility (docs/stability.md) --------------------
#
# It makes a healthy machine look sick on purpose. Here, not in a module of its own,
# because a declaration imports nothing but the contract and it checks the spec's
# ``faults``. The spec's ``faults``, and ``NPULAB_STABILITY_FAULTS`` for a run by hand (a host
# worker passes no ``NPULAB_*`` variable of its own to a run), hold faults separated
# by ``;``, each ``name:key=value,...``::
#
#     mismatch:interval=3,device=0    device 0's consistency result is perturbed at interval 3
#     decay:from=2,factor=0.5         from interval 2 on, every device works at half speed
#     decay:from=2,factor=0.5,device=1   ... only device 1
#     error:interval=2,device=0       device 0's workload raises at interval 2
#     die:interval=2                  the run's process kills itself (SIGKILL) at interval 2
#
# Intervals count from 1. ``device`` is the run's own device number (0 to devices-1).
# A decay really slows the work (it sleeps after each iteration), so what the
# verdict sees is measured, not made up.

FAULT_MISMATCH, FAULT_DECAY, FAULT_ERROR, FAULT_DIE = "mismatch", "decay", "error", "die"
_KEYS = {
    FAULT_MISMATCH: {"interval": int, "device": int},
    FAULT_DECAY: {"from": int, "factor": float, "device": int},
    FAULT_ERROR: {"interval": int, "device": int},
    FAULT_DIE: {"interval": int},
}
_REQUIRED = {
    FAULT_MISMATCH: ("interval",),
    FAULT_DECAY: ("from", "factor"),
    FAULT_ERROR: ("interval",),
    FAULT_DIE: ("interval",),
}


class FaultSyntaxError(ValueError):
    """A faults text does not parse; the message says where."""


class Faults:
    """The parsed faults; each question is asked per device and interval."""

    def __init__(self, faults: list[dict[str, object]] | None = None) -> None:
        self.faults = faults or []

    def __bool__(self) -> bool:
        return bool(self.faults)

    def _matching(self, name: str, interval: int, device: int | None) -> list[dict[str, object]]:
        found = []
        for fault in self.faults:
            if fault["name"] != name:
                continue
            if "device" in fault and device is not None and fault["device"] != device:
                continue
            if "interval" in fault and fault["interval"] != interval:
                continue
            if "from" in fault and interval < fault["from"]:  # type: ignore[operator]
                continue
            found.append(fault)
        return found

    def mismatch(self, interval: int, device: int) -> bool:
        return bool(self._matching(FAULT_MISMATCH, interval, device))

    def error(self, interval: int, device: int) -> bool:
        return bool(self._matching(FAULT_ERROR, interval, device))

    def die(self, interval: int) -> bool:
        return bool(self._matching(FAULT_DIE, interval, None))

    def slowdown(self, interval: int, device: int) -> float:
        """The factor a device's speed is multiplied by in this interval (1.0: none)."""
        factor = 1.0
        for fault in self._matching(FAULT_DECAY, interval, device):
            factor *= float(fault["factor"])  # type: ignore[arg-type]
        return factor


def parse_faults(text: str) -> Faults:
    """The faults of ``text``; FaultSyntaxError says what is wrong."""
    faults = []
    for part in (piece.strip() for piece in text.split(";")):
        if not part:
            continue
        name, _, rest = part.partition(":")
        name = name.strip()
        if name not in _KEYS:
            raise FaultSyntaxError(f"unknown fault {name!r}; known: " + ", ".join(sorted(_KEYS)))
        fault: dict[str, object] = {"name": name}
        for item in (piece.strip() for piece in rest.split(",")):
            if not item:
                continue
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep or key not in _KEYS[name]:
                raise FaultSyntaxError(
                    f"{name}: {item!r}; it takes " + ", ".join(f"{k}=" for k in _KEYS[name])
                )
            try:
                fault[key] = _KEYS[name][key](value.strip())
            except ValueError:
                raise FaultSyntaxError(f"{name}: {key} must be a number, not {value!r}") from None
        missing = [key for key in _REQUIRED[name] if key not in fault]
        if missing:
            raise FaultSyntaxError(f"{name}: needs " + ", ".join(f"{k}=" for k in missing))
        if name == FAULT_DECAY and not 0 < float(fault["factor"]) <= 1:  # type: ignore[arg-type]
            raise FaultSyntaxError("decay: factor must be above 0 and at most 1")
        faults.append(fault)
    return Faults(faults)


def _check_workload(value: str) -> str | None:
    if value in WORKLOADS:
        return None
    if value.startswith(BUILTIN_PREFIX) or value.endswith(".py"):
        return "one of " + ", ".join(WORKLOADS) + ", or package.module:function"
    module, _, function = value.partition(":")
    names = [*module.split("."), function]
    if function and all(name.isidentifier() for name in names):
        return None
    return "one of " + ", ".join(WORKLOADS) + ", or package.module:function"


def _check_faults(value: str) -> str | None:
    try:
        parse_faults(value)
    except FaultSyntaxError as exc:
        return str(exc)
    return None


def plan(spec: dict[str, Any]) -> tuple[float, float, int]:
    """The run's (duration_s, interval_s, intervals): the preset, then what the spec sets."""
    duration, interval = PRESETS[spec["preset"]]
    if spec["duration_s"]:
        duration = spec["duration_s"]
    if spec["interval_s"]:
        interval = spec["interval_s"]
    interval = min(interval, duration)
    return duration, interval, max(1, math.ceil(duration / interval - 1e-9))


def check_spec(spec: dict[str, Any]) -> dict[str, str]:
    """What is wrong across fields: a run that cannot end before its timeout, bad thresholds."""
    errors = {}
    duration, _interval, intervals = plan(spec)
    if duration + TIMEOUT_MARGIN_S > spec["timeout_s"]:
        errors["duration_s"] = (
            f"the run lasts {duration:g} s; timeout_s ({spec['timeout_s']}) must leave "
            f"{TIMEOUT_MARGIN_S} s more"
        )
    if intervals > MAX_INTERVALS:
        errors["interval_s"] = f"{intervals} intervals; at most {MAX_INTERVALS}"
    if spec["warn_drop_pct"] > spec["fail_drop_pct"]:
        errors["warn_drop_pct"] = "must not be above fail_drop_pct"
    return errors


FIELDS = [
    *common_fields(default_timeout_s=6 * 3600, default_hang_timeout_s=1800),
    Field(
        "preset",
        "string",
        default=DEFAULT_PRESET,
        choices=tuple(PRESETS),
        help="quick: 1 min in 5 s intervals; medium: 15 min in 30 s; long: 4 h in 60 s. "
        "duration_s and interval_s override it.",
    ),
    Field(
        "duration_s",
        "number",
        default=0.0,
        minimum=0,
        maximum=7 * 24 * 3600,
        help="Seconds of load; 0: the preset's.",
    ),
    Field(
        "interval_s",
        "number",
        default=0.0,
        minimum=0,
        maximum=24 * 3600,
        help="Seconds between records (throughput, telemetry, consistency); 0: the preset's.",
    ),
    Field(
        "workload",
        "string",
        default=MATMUL,
        check=_check_workload,
        help="matmul or conv (TFLOP/s), mixed (a small transformer training step, steps/s), "
        "or package.module:function called each iteration with (device, dtype).",
    ),
    Field("dtype", "string", default="float32", choices=DTYPES, help="Dtype of the workload."),
    Field(
        "size",
        "integer",
        default=0,
        minimum=0,
        maximum=32768,
        help="Matrix side (matmul), image side (conv) or model width (mixed); "
        "0: the workload's default for the device type.",
    ),
    Field(
        "warn_drop_pct",
        "number",
        default=10.0,
        minimum=0,
        maximum=100,
        help="Warn when a device's throughput drops more than this % below its first intervals'.",
    ),
    Field(
        "fail_drop_pct",
        "number",
        default=50.0,
        minimum=0,
        maximum=100,
        help="Fail when it drops more than this %.",
    ),
    Field(
        "max_temperature_c",
        "number",
        default=95.0,
        minimum=0,
        maximum=200,
        help="Warn when a device reports a temperature above this; 0: no limit.",
    ),
    Field(
        "rtol",
        "number",
        default=0.0,
        minimum=0,
        maximum=1,
        help="Relative tolerance of a consistency check that is not bitwise equal; "
        "0: the dtype's own (1e-5 float32, 1e-2 float16/bfloat16, 1e-12 float64).",
    ),
    Field("seed", "integer", default=0, minimum=0, maximum=2**31 - 1),
    Field(
        "faults",
        "string",
        default="",
        check=_check_faults,
        help="A test facility: faults injected on purpose, e.g. mismatch:interval=3,device=0 "
        "(docs/stability.md); empty: none.",
    ),
]

KIND = Kind(
    STABILITY,
    "Stability test: do the devices stay correct and fast for hours under load?",
    "workers.kinds.stability.runner",
    FIELDS,
    # Not infrastructure failures: a failed verdict is what the run is for, the finding
    # itself. CI must not retry it away, and under an upgrade's target it is a no-go.
    causes=(
        Cause(CONSISTENCY_MISMATCH, "Silent data corruption"),
        Cause(DEVICE_FAULT, "Device failed under load"),
        Cause(THROUGHPUT_DROP, "Throughput dropped under load"),
    ),
    event_types=(
        EventType(
            INTERVAL,
            {
                "interval": ("integer",),
                "device": ("integer",),
                "seconds": ("number",),
                "iterations": ("integer",),
                "throughput": ("number", "null"),
                "unit": ("string",),
                "consistency": ("string",),
                "max_rel_err": ("number", "null"),
                "health": ("string",),
                "telemetry": ("object",),
                "error": ("string",),
            },
            ("interval", "device", "consistency"),
            "one device in one interval: throughput, consistency outcome, telemetry",
        ),
    ),
    check=check_spec,
)
