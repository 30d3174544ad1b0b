"""Write paths for snapshots: recording uploads, known-good marks, snapshot requests."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from npulab.audit import actions
from npulab.audit.services import record
from npulab.hosts.models import Host
from npulab.snapshots.content import content_hash, python_executable, split, summarize, validate
from npulab.snapshots.diff import change_line, diff
from npulab.snapshots.models import HostVersion, Snapshot

# How snapshots and hosts are named as the targets of audit entries.
AUDIT_SNAPSHOT = "snapshot"
AUDIT_HOST = "host"


@dataclass
class Recorded:
    snapshot: Snapshot
    version: HostVersion
    new_version: bool


@transaction.atomic
def do_record_snapshot(host: Host, document: Any, now: datetime | None = None) -> Recorded:
    """Store an upload: its content once, a new history step when it changed.

    Raises SnapshotInvalid for a document that is not a snapshot; nothing is
    stored then. The run an upload was taken for is pointed at it by
    ``npulab.agent.services.do_upload_snapshot``.
    """
    now = now or timezone.now()
    stable, telemetry = split(validate(document))
    snapshot = _snapshot_for(host, stable, now)

    python = python_executable(stable)
    latest = (
        HostVersion.objects.select_for_update()
        .filter(host=host, python=python)
        .select_related("snapshot")
        .order_by("-first_seen", "-id")
        .first()
    )
    if latest is not None and latest.snapshot_id == snapshot.pk:
        latest.last_seen = now
        latest.telemetry = telemetry
        latest.save(update_fields=["last_seen", "telemetry"])
        version, new_version = latest, False
    else:
        change = change_line(diff(latest.snapshot.data, stable)) if latest else "first snapshot"
        version = HostVersion.objects.create(
            host=host,
            python=python,
            snapshot=snapshot,
            previous=latest,
            change=change,
            first_seen=now,
            last_seen=now,
            telemetry=telemetry,
        )
        new_version = True

    if host.snapshot_requested:
        Host.objects.filter(pk=host.pk).update(snapshot_requested=False)
    return Recorded(snapshot, version, new_version)


def _snapshot_for(host: Host, stable: dict[str, Any], now: datetime) -> Snapshot:
    digest = content_hash(stable)
    snapshot = Snapshot.objects.filter(content_hash=digest).first()
    if snapshot is None:
        try:
            with transaction.atomic():
                return Snapshot.objects.create(
                    content_hash=digest,
                    host=host,
                    python=python_executable(stable),
                    data=stable,
                    summary=summarize(stable),
                    first_seen=now,
                    last_seen=now,
                )
        except IntegrityError:
            # The same content arrived in a concurrent upload.
            snapshot = Snapshot.objects.get(content_hash=digest)
    Snapshot.objects.filter(pk=snapshot.pk).update(last_seen=now)
    snapshot.last_seen = now
    return snapshot


@transaction.atomic
def do_mark_known_good(snapshot: Snapshot, user: AbstractBaseUser, note: str) -> Snapshot:
    snapshot.known_good_by = user
    snapshot.known_good_at = timezone.now()
    snapshot.known_good_note = note.strip()
    snapshot.save(update_fields=["known_good_by", "known_good_at", "known_good_note"])
    record(
        actions.SNAPSHOT_MARK_KNOWN_GOOD,
        target_type=AUDIT_SNAPSHOT,
        target_id=snapshot.pk,
        target_label=snapshot.content_hash[:12],
        user=user,
        note=snapshot.known_good_note,
    )
    return snapshot


@transaction.atomic
def do_unmark_known_good(snapshot: Snapshot, by: AbstractBaseUser | None = None) -> Snapshot:
    snapshot.known_good_by = None
    snapshot.known_good_at = None
    snapshot.known_good_note = ""
    snapshot.save(update_fields=["known_good_by", "known_good_at", "known_good_note"])
    record(
        actions.SNAPSHOT_UNMARK_KNOWN_GOOD,
        target_type=AUDIT_SNAPSHOT,
        target_id=snapshot.pk,
        target_label=snapshot.content_hash[:12],
        user=by,
    )
    return snapshot


@transaction.atomic
def do_request_snapshot(host: Host, by: AbstractBaseUser | None = None) -> None:
    """The host's worker collects and sends a snapshot after its next heartbeat."""
    Host.objects.filter(pk=host.pk).update(snapshot_requested=True)
    record(
        actions.HOST_REQUEST_SNAPSHOT,
        target_type=AUDIT_HOST,
        target_id=host.pk,
        target_label=host.name,
        user=by,
    )
