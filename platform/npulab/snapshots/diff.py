"""What changed between two snapshots, section by section.

Pure functions on stable snapshot content (see content.py), so they serve the
diff page, the API, the history timeline and the upgrade review alike.
"""

from __future__ import annotations

from typing import Any

from npulab.snapshots.content import VERSION_LABELS, summarize

# Device fields whose change is worth a line (readings are telemetry, not here).
DEVICE_FIELDS = ("name", "health", "bus_id", "memory_total_mb", "hbm_total_mb", "phy_id")


def diff(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Every difference from snapshot content ``a`` to ``b``; ``identical`` if none."""
    result = {
        "versions": version_changes(summarize(a), summarize(b)),
        "packages": mapping_changes(_packages(a), _packages(b)),
        "devices": device_changes(a, b),
        "env": mapping_changes(_env(a), _env(b)),
        "findings": finding_changes(a["findings"], b["findings"]),
    }
    result["identical"] = not any(_changed(section) for section in result.values())
    return result


def version_changes(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"name": label, "from": old.get(key), "to": new.get(key)}
        for key, label in VERSION_LABELS
        if old.get(key) != new.get(key)
    ]


def mapping_changes(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    return {
        "added": {key: new[key] for key in sorted(new.keys() - old.keys())},
        "removed": {key: old[key] for key in sorted(old.keys() - new.keys())},
        "changed": {
            key: [old[key], new[key]]
            for key in sorted(old.keys() & new.keys())
            if old[key] != new[key]
        },
        "unchanged": sum(1 for key in old.keys() & new.keys() if old[key] == new[key]),
    }


def device_changes(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    old, new = _devices(a), _devices(b)
    changed = []
    for key in sorted(old.keys() & new.keys()):
        for field in DEVICE_FIELDS:
            if old[key].get(field) != new[key].get(field):
                changed.append(
                    {
                        "device": key,
                        "field": field,
                        "from": old[key].get(field),
                        "to": new[key].get(field),
                    }
                )
    return {
        "added": sorted(new.keys() - old.keys()),
        "removed": sorted(old.keys() - new.keys()),
        "changed": changed,
    }


def finding_changes(old: list[Any], new: list[Any]) -> dict[str, list[dict[str, Any]]]:
    def by_id(findings: list[Any]) -> dict[str, dict[str, Any]]:
        return {str(f.get("id") or f.get("title")): f for f in findings if isinstance(f, dict)}

    before, after = by_id(old), by_id(new)
    return {
        "appeared": [after[key] for key in after if key not in before],
        "resolved": [before[key] for key in before if key not in after],
    }


def change_line(changes: dict[str, Any]) -> str:
    """One line for a history timeline: "CANN 8.0.RC3 → 8.1.RC1, torch_npu 2.1.0 → 2.5.1, …"."""
    parts = [
        f"{item['name']} {item['from'] or 'none'} → {item['to'] or 'none'}"
        for item in changes["versions"]
    ]
    packages = changes["packages"]
    counts = [
        f"{sign}{len(packages[key])}"
        for key, sign in (("added", "+"), ("removed", "−"), ("changed", "~"))
        if packages[key]
    ]
    if counts:
        parts.append(" ".join(counts) + " packages")
    env = changes["env"]
    env_count = len(env["added"]) + len(env["removed"]) + len(env["changed"])
    if env_count:
        parts.append(f"{env_count} env variable{'s' if env_count != 1 else ''}")
    findings = changes["findings"]
    if findings["appeared"]:
        parts.append(f"{len(findings['appeared'])} new finding(s)")
    if findings["resolved"]:
        parts.append(f"{len(findings['resolved'])} finding(s) resolved")
    if (
        changes["devices"]["added"]
        or changes["devices"]["removed"]
        or changes["devices"]["changed"]
    ):
        parts.append("devices changed")
    return ", ".join(parts) or "no change"


def _changed(section: Any) -> bool:
    if isinstance(section, list):
        return bool(section)
    return any(value for key, value in section.items() if key != "unchanged")


def _packages(snapshot: dict[str, Any]) -> dict[str, str]:
    return dict(snapshot["python"].get("packages") or {})


def _env(snapshot: dict[str, Any]) -> dict[str, str]:
    env = snapshot["env"]
    return dict(env.get("vars") or {})


def _devices(snapshot: dict[str, Any]) -> dict[str, dict[str, Any]]:
    devices = {}
    for chip in snapshot["npu"].get("chips") or []:
        if isinstance(chip, dict):
            devices[f"npu {chip.get('npu')} chip {chip.get('chip')}"] = chip
    for gpu in snapshot["cuda"].get("gpus") or []:
        if isinstance(gpu, dict):
            devices[f"gpu {gpu.get('index')}"] = gpu
    return devices
