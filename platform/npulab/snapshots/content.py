"""What a snapshot is made of: validation, the stable content that identifies it, its summary.

A snapshot document comes from ``python -m workers.collect``. Its stable part
(what is installed) decides its identity; readings that change from minute to
minute (temperatures, memory in use, processes, when it was taken) are
telemetry, kept apart so that an idle host does not grow a new version with
every upload.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from workers.contract.compat import current_cann_version

SCHEMA = 1
SECTIONS = ("host", "npu", "ascend", "python", "env", "cuda", "findings")
# npu-smi columns that are readings, not facts about the installation.
CHIP_READINGS = (
    "power_w",
    "temp_c",
    "aicore_pct",
    "memory_used_mb",
    "hbm_used_mb",
    "hugepages_used",
)
SEVERITIES = ("error", "warning", "info")


class SnapshotInvalid(ValueError):
    """The upload is not a snapshot this platform can store; the message says why."""


def validate(document: Any) -> dict[str, Any]:
    """The document if it has every section in the right shape, else SnapshotInvalid."""
    if not isinstance(document, dict):
        raise SnapshotInvalid("must be a JSON object")
    if document.get("schema") != SCHEMA:
        raise SnapshotInvalid(f"schema must be {SCHEMA}, got {document.get('schema')!r}")
    missing = [name for name in SECTIONS if name not in document]
    if missing:
        raise SnapshotInvalid("missing section(s): " + ", ".join(missing))
    wrong = [
        name for name in SECTIONS if name != "findings" and not isinstance(document[name], dict)
    ]
    if wrong:
        raise SnapshotInvalid("section(s) must be objects: " + ", ".join(wrong))
    if not isinstance(document["findings"], list):
        raise SnapshotInvalid("findings must be a list")
    python = document["python"]
    if "error" not in python and not isinstance(python.get("executable"), str):
        raise SnapshotInvalid("python.executable must be a string")
    return document


def split(document: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(stable content, telemetry) of a validated document; the input is not changed."""
    stable = copy.deepcopy(document)
    stable.pop("collected_at", None)
    collector = stable.get("collector")
    if isinstance(collector, dict):
        collector.pop("seconds", None)
    telemetry: dict[str, Any] = {"collected_at": document.get("collected_at")}
    npu = stable["npu"]
    readings = []
    for chip in npu.get("chips") or []:
        if isinstance(chip, dict):
            reading = {key: chip.pop(key) for key in CHIP_READINGS if key in chip}
            readings.append({"npu": chip.get("npu"), "chip": chip.get("chip"), **reading})
    telemetry["chips"] = readings
    telemetry["processes"] = npu.pop("processes", [])
    return stable, telemetry


def content_hash(stable: dict[str, Any]) -> str:
    canonical = json.dumps(stable, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def python_executable(stable: dict[str, Any]) -> str:
    return str(stable["python"].get("executable") or "")


def summarize(stable: dict[str, Any]) -> dict[str, Any]:
    """The versions a person looks for first, flat, for lists, timelines and diffs."""
    host = stable["host"]
    python = stable["python"]
    key = python.get("key") or {}
    ascend = stable["ascend"]
    npu = stable["npu"]
    findings = [f for f in stable["findings"] if isinstance(f, dict)]
    return {
        "os": (host.get("os") or {}).get("name"),
        "kernel": host.get("kernel"),
        "driver": _get(ascend, "driver", "version"),
        "firmware": _get(ascend, "firmware", "version"),
        "cann": current_cann_version(ascend.get("cann") or {}),
        "npu_smi": npu.get("tool_version"),
        "chips": chips_line(npu),
        "gpus": gpus_line(stable["cuda"]),
        "python": python.get("version"),
        "torch": key.get("torch"),
        "torch_npu": key.get("torch-npu"),
        "mindspore": key.get("mindspore"),
        "numpy": key.get("numpy"),
        "packages": len(python.get("packages") or {}),
        "findings": {
            severity: sum(1 for f in findings if f.get("severity") == severity)
            for severity in SEVERITIES
        },
    }


# The versions of a summary, in the order a change line names them.
VERSION_LABELS = (
    ("driver", "driver"),
    ("firmware", "firmware"),
    ("cann", "CANN"),
    ("npu_smi", "npu-smi"),
    ("torch", "torch"),
    ("torch_npu", "torch_npu"),
    ("mindspore", "mindspore"),
    ("numpy", "numpy"),
    ("python", "Python"),
    ("os", "OS"),
    ("kernel", "kernel"),
    ("chips", "NPUs"),
    ("gpus", "GPUs"),
)


def chips_line(npu: dict[str, Any]) -> str | None:
    return _count_names(npu.get("chips"))


def gpus_line(cuda: dict[str, Any]) -> str | None:
    return _count_names(cuda.get("gpus"))


def _count_names(items: Any) -> str | None:
    """ "8 × 910B3" from a list of devices, grouped by name in order of appearance."""
    counts: dict[str, int] = {}
    for item in items or []:
        if isinstance(item, dict):
            name = str(item.get("name") or "?")
            counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{count} × {name}" for name, count in counts.items()) or None


def _get(section: dict[str, Any], *path: str) -> Any:
    value: Any = section
    for part in path:
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value
