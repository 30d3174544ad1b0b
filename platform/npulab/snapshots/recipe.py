"""The rollback recipe: what to reinstall to get a known-good environment back."""

from __future__ import annotations

from typing import Any

from npulab.snapshots.models import Snapshot


def rollback_recipe(snapshot: Snapshot) -> dict[str, Any]:
    data = snapshot.data
    ascend = data.get("ascend") or {}
    cann = ascend.get("cann") or {}
    python = data.get("python") or {}
    return {
        "snapshot": snapshot.pk,
        "hash": snapshot.content_hash,
        "host": snapshot.host.name,
        "known_good": snapshot.known_good,
        "known_good_note": snapshot.known_good_note,
        "os": snapshot.summary.get("os"),
        "kernel": snapshot.summary.get("kernel"),
        "driver": (ascend.get("driver") or {}).get("version"),
        "firmware": (ascend.get("firmware") or {}).get("version"),
        "cann": [
            {key: install.get(key) for key in ("kind", "version", "arch", "path")}
            for install in cann.get("installs") or []
            if isinstance(install, dict)
        ],
        "python": python.get("version"),
        "python_executable": python.get("executable"),
        "requirements": requirements_txt(snapshot),
    }


def requirements_txt(snapshot: Snapshot) -> str:
    """A pip requirements file pinned to every distribution of the snapshot."""
    summary = snapshot.summary
    good = (
        f"known good since {snapshot.known_good_at:%Y-%m-%d} ({snapshot.known_good_note})"
        if snapshot.known_good
        else "not marked known good"
    )
    lines = [
        f"# npulab snapshot {snapshot.short_hash} of host {snapshot.host.name}, {good}",
        f"# Python {summary.get('python')} ({snapshot.python})",
        f"# driver {summary.get('driver')}, firmware {summary.get('firmware')}, "
        f"CANN {summary.get('cann')}",
        "# Install the driver, firmware and CANN packages first: pip cannot.",
    ]
    packages = (snapshot.data.get("python") or {}).get("packages") or {}
    lines += [f"{name}=={version}" for name, version in sorted(packages.items())]
    return "\n".join(lines) + "\n"
