"""Write paths for hosts: creation, tokens, registration, heartbeats, liveness."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from npulab.accounts import tokens
from npulab.audit import actions
from npulab.audit.services import record
from npulab.hosts.models import Host
from npulab.projects.models import Pool


def do_create_host(name: str, labels: list[str] | None = None) -> Host:
    host = Host(name=name, labels=labels or [])
    host.full_clean()
    host.save()
    return host


def do_issue_host_token(host: Host) -> str:
    """A new token for the host's worker, replacing any earlier one; shown only here."""
    plain = tokens.generate(tokens.HOST_TOKEN_PREFIX)
    host.token_digest = tokens.digest(plain)
    host.token_display = plain[: tokens.DISPLAY_CHARS]
    host.save(update_fields=["token_digest", "token_display", "updated"])
    return plain


@transaction.atomic
def do_move_host_to_pool(host: Host, pool: Pool, by: AbstractBaseUser | None) -> Host:
    """Put ``host`` in ``pool``: from now on only its projects' runs are placed there.

    Runs already placed on the host go on; the scheduler's next pass follows the move.
    """
    before = Host.objects.select_for_update().select_related("pool").get(pk=host.pk).pool
    if before.pk == pool.pk:
        return host
    host.pool = pool
    host.save(update_fields=["pool", "updated"])
    record(
        actions.HOST_MOVE_TO_POOL,
        target_type="host",
        target_id=host.name,
        user=by,
        data={"pool": pool.name, "was": before.name},
    )
    return host


def do_register_host(host: Host, facts: dict[str, Any]) -> Host:
    """Record what the worker found on its host and mark the host online.

    Placement is asked for by the caller (``npulab.agent.services``): hosts sit
    below runs and do not send run messages.
    """
    now = timezone.now()
    devices = facts["devices"]
    host.device_type = facts["device_type"]
    host.devices = devices
    host.device_count = len(devices)
    # The operator's labels stand; a host's own say is kept apart (docs/security.md).
    host.reported_labels = list(facts.get("labels") or [])
    host.devices_unverified = devices_problem(host, latest_snapshot_data(host))
    for field in ("hostname", "worker_version", "platform"):
        setattr(host, field, facts.get(field, ""))
    host.python_version = facts.get("python", "")
    host.network = facts.get("network") or {}
    host.status = Host.Status.ONLINE
    host.last_heartbeat = now
    host.registered = now
    host.save()
    return host


def latest_snapshot_data(host: Host) -> dict[str, Any] | None:
    """The document of the host's latest snapshot, None before its first."""
    version = host.versions.select_related("snapshot").order_by("-first_seen", "-id").first()
    return version.snapshot.data if version is not None else None


def _snapshot_devices(device_type: str, data: dict[str, Any]) -> int:
    """How many devices of ``device_type`` a snapshot shows (npu-smi's chips, nvidia-smi's
    GPUs)."""
    section = {"npu": ("npu", "chips"), "cuda": ("cuda", "gpus")}.get(device_type)
    if section is None:
        return 0
    found = (data.get(section[0]) or {}).get(section[1]) if isinstance(data, dict) else None
    return len(found) if isinstance(found, list) else 0


def devices_problem(host: Host, snapshot: dict[str, Any] | None) -> str:
    """Why the host's registered device type and count are not to be believed yet, or "".

    Believed: a CPU host; what an operator accepted; what the host's own snapshot shows
    (then it counts as accepted). A worker's word alone (``NPULAB_DEVICE_TYPE=npu``) could
    draw runs meant for real accelerators, and their secrets.
    """
    claim = (host.device_type, host.device_count)
    if host.device_type == "cpu" or claim == (
        host.accepted_device_type,
        host.accepted_device_count,
    ):
        return ""
    shown = _snapshot_devices(host.device_type, snapshot) if snapshot is not None else 0
    if snapshot is not None and shown >= host.device_count:
        host.accepted_device_type, host.accepted_device_count = claim
        return ""
    seen = "no snapshot yet" if snapshot is None else f"its snapshot shows {shown}"
    return (
        f"registered {host.device_count} {host.device_type} device(s), {seen}: "
        "waiting for an operator to accept"
    )


def do_check_host_devices(host: Host, snapshot: dict[str, Any]) -> None:
    """A new snapshot of the host: the device claim it backs no longer waits."""
    problem = devices_problem(host, snapshot)
    if problem != host.devices_unverified or not problem:
        host.devices_unverified = problem
        host.save(
            update_fields=[
                "devices_unverified",
                "accepted_device_type",
                "accepted_device_count",
                "updated",
            ]
        )


@transaction.atomic
def do_accept_host_devices(host: Host, by: AbstractBaseUser | None) -> Host:
    """An operator accepts the host's registered device type and count: runs may come."""
    host.accepted_device_type = host.device_type
    host.accepted_device_count = host.device_count
    host.devices_unverified = ""
    host.save(
        update_fields=[
            "accepted_device_type",
            "accepted_device_count",
            "devices_unverified",
            "updated",
        ]
    )
    record(
        actions.HOST_ACCEPT_DEVICES,
        target_type="host",
        target_id=host.name,
        user=by,
        data={"device_type": host.device_type, "device_count": host.device_count},
    )
    return host


def do_record_heartbeat(host: Host) -> bool:
    """Mark the host alive; True when it was not online before (its capacity came back)."""
    came_back = host.status != Host.Status.ONLINE
    host.last_heartbeat = timezone.now()
    host.status = Host.Status.ONLINE
    host.save(update_fields=["last_heartbeat", "status", "updated"])
    return came_back


def sweep_hosts(now: datetime | None = None) -> int:
    """Mark hosts whose heartbeat stopped as offline; returns how many."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.NPULAB["HOST_HEARTBEAT_TIMEOUT_S"])
    stale = Host.objects.filter(status=Host.Status.ONLINE).exclude(last_heartbeat__gte=cutoff)
    return stale.update(status=Host.Status.OFFLINE, updated=now)
