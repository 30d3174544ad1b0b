"""Reads of health for other apps: placement's view of hosts and devices, the pages."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from npulab.health.models import (
    DEVICE_STATES_CLOSED,
    DeviceHealth,
    HealthChange,
    HostHealth,
    HostState,
)
from npulab.hosts.models import Host

MAX_REASONS_IN_TEXT = 2


def health_of(host: Host) -> HostHealth | None:
    """The host's health row if it has one (a host no rule has seen yet is healthy)."""
    try:
        return host.health
    except HostHealth.DoesNotExist:
        return None


def placement_block(host: Host) -> str:
    """Why the scheduler must not place a new run on ``host`` because of its health, or "".

    Read from ``host.health``: load hosts with ``select_related("health")`` to keep it one query.
    """
    health = health_of(host)
    if health is None:
        return ""
    if health.state == HostState.DRAINED:
        return f"is drained: {health.drain_note}" if health.drain_note else "is drained"
    if health.state in (HostState.UNHEALTHY, HostState.OFFLINE):
        return f"is {health.state}: {reasons_text(health.reasons)}"
    return ""


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


def closed_devices() -> dict[int, set[int]]:
    """Per host id, the device indices no new run may lease (bad or unhealthy): one query."""
    closed: dict[int, set[int]] = defaultdict(set)
    rows = DeviceHealth.objects.filter(state__in=DEVICE_STATES_CLOSED).values_list(
        "host_id", "index"
    )
    for host_id, index in rows:
        closed[host_id].add(index)
    return closed


def host_health_context(host: Host, viewer: Any) -> dict[str, Any]:
    """The host page's part (``npulab.hosts.pages.host_page``)."""
    return {
        "health": health_of(host),
        "device_health": {
            device.index: device for device in DeviceHealth.objects.filter(host=host)
        },
        "health_changes": list(HealthChange.objects.filter(host=host).select_related("by")[:10]),
    }
