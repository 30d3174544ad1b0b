"""Read paths for snapshots shared by pages and the API."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import F, QuerySet
from django.urls import reverse
from django.utils import timezone

from npulab.hosts.models import Host
from npulab.snapshots.models import HostVersion, Snapshot


def history(host: Host) -> QuerySet[HostVersion]:
    """The host's environment steps, newest first, without the snapshots' full content."""
    return (
        HostVersion.objects.filter(host=host)
        .select_related("snapshot")
        .defer("snapshot__data", "telemetry")
        .annotate(previous_snapshot_id=F("previous__snapshot_id"))
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


HISTORY_FIELDS = (
    "id",
    "first_seen",
    "last_seen",
    "change",
    "snapshot_id",
    "snapshot__content_hash",
    "snapshot__known_good_at",
    "previous_snapshot_id",
)


def history_rows(versions: QuerySet[HostVersion]) -> list[dict[str, Any]]:
    """History steps ready to display.

    A host can have hundreds of steps: formatting dates and building links
    here, once, keeps its history page fast where template filters and
    ``{% url %}`` per row would not.
    """
    diff_url = reverse("snapshots:snapshot_diff")
    rows = []
    for version in versions.values(*HISTORY_FIELDS):
        snapshot_id = version["snapshot_id"]
        previous_id = version["previous_snapshot_id"]
        rows.append(
            {
                "id": version["id"],
                "since": _minute(version["first_seen"]),
                "until": _minute(version["last_seen"]),
                "change": version["change"],
                "short_hash": version["snapshot__content_hash"][:12],
                "snapshot_url": reverse("snapshots:snapshot_detail", args=[snapshot_id]),
                "known_good": version["snapshot__known_good_at"] is not None,
                "diff_url": f"{diff_url}?a={previous_id}&b={snapshot_id}" if previous_id else "",
            }
        )
    return rows


def _minute(moment: datetime) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M")
