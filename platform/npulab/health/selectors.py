"""Reads of health for other apps: a host's health row and reasons (placement's rules are
in ``npulab.runs.placement``), the pages."""

from __future__ import annotations

from typing import Any

from npulab.health.models import (
    DeviceHealth,
    HealthChange,
    HostHealth,
)
from npulab.hosts.models import Host

MAX_REASONS_IN_TEXT = 2


def health_of(host: Host) -> HostHealth | None:
    """The host's health row if it has one (a host no rule has seen yet is healthy)."""
    try:
        return host.health
    except HostHealth.DoesNotExist:
        return None


def reasons_text(reasons: list[dict[str, Any]]) -> str:
    """The first reasons as one line: "device 3: chip Health is Alarm (npu-smi); …"."""
    parts = [
        (f"device {reason['device']}: " if reason.get("device") is not None else "")
        + reason["detail"]
        for reason in reasons[:MAX_REASONS_IN_TEXT]
    ]
    more = len(reasons) - MAX_REASONS_IN_TEXT
    return (
        "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")
        if parts
        else "no reason recorded"
    )


def host_health_context(host: Host, viewer: Any) -> dict[str, Any]:
    """The host page's part (``npulab.hosts.pages.host_page``)."""
    return {
        "health": health_of(host),
        "device_health": {
            device.index: device for device in DeviceHealth.objects.filter(host=host)
        },
        "health_changes": list(HealthChange.objects.filter(host=host).select_related("by")[:10]),
    }
