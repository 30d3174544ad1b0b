"""Read paths for snapshots shared by pages and the API."""

from __future__ import annotations

from django.db.models import QuerySet

from npulab.hosts.models import Host
from npulab.snapshots.models import HostVersion, Snapshot


def history(host: Host) -> QuerySet[HostVersion]:
    """The host's environment steps, newest first."""
    return (
        HostVersion.objects.filter(host=host)
        .select_related("snapshot", "snapshot__known_good_by")
        .order_by("-first_seen", "-id")
    )


def current_version(host: Host) -> HostVersion | None:
    """The step the host's most recent upload belongs to."""
    return (
        HostVersion.objects.filter(host=host)
        .select_related("snapshot")
        .order_by("-last_seen", "-id")
        .first()
    )


def current_snapshot(host: Host) -> Snapshot | None:
    version = current_version(host)
    return version.snapshot if version else None
