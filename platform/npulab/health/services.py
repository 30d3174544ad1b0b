"""Write paths for health: rules applied to samples, transitions, drain, bad devices.

Every change of a host's or a device's health state goes through ``_settle``,
which records it (``HealthChange``), tells the webhook and, when the host or a
device opened up again, asks for placement (the runs waiting for it).
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from npulab.audit import actions
from npulab.audit.services import record
from npulab.celery import app
from npulab.core.errors import Conflict
from npulab.health import rules
from npulab.health.models import (
    HOST_STATES_CLOSED,
    DeviceHealth,
    DeviceState,
    HealthChange,
    HostHealth,
    HostState,
)
from npulab.hosts.models import Host
from workers.contract.tasks import CONTROL_QUEUE, DELIVER_HEALTH_WEBHOOK, PLACE_RUNS

log = logging.getLogger(__name__)

MAX_NOTE_CHARS = 2000
AUDIT_TARGET = "host"


def iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


# -- what the rules found --------------------------------------------------------


def _reason(rule: str, finding: rules.Finding, device: int | None, since: str) -> dict[str, Any]:
    return {
        "rule": rule,
        "level": finding.level,
        "detail": finding.detail,
        "device": device,
        "since": since,
    }


def _merge(
    old: list[dict[str, Any]],
    findings: dict[str, Any],
    device: int | None,
    now: datetime,
) -> list[dict[str, Any]]:
    """The reasons after ``findings`` (rule → Finding, None or UNCHANGED); ``since`` kept."""
    by_rule = {reason["rule"]: reason for reason in old}
    for rule, finding in findings.items():
        if finding is rules.UNCHANGED:
            continue
        if finding is None:
            by_rule.pop(rule, None)
            continue
        earlier = by_rule.get(rule)
        since = earlier["since"] if earlier and earlier["level"] == finding.level else iso(now)
        by_rule[rule] = _reason(rule, finding, device, since)
    # Worst first: the page and the queue reason lead with it.
    return sorted(
        by_rule.values(), key=lambda reason: rules.LEVELS.index(reason["level"]), reverse=True
    )


def _device_state(device: DeviceHealth) -> str:
    if any(reason["rule"] == rules.MARKED_BAD for reason in device.reasons):
        return DeviceState.BAD
    level = rules.worst([reason["level"] for reason in device.reasons])
    return {rules.DEGRADED: DeviceState.DEGRADED, rules.UNHEALTHY: DeviceState.UNHEALTHY}.get(
        level, DeviceState.HEALTHY
    )


def _host_state(
    host: Host, health: HostHealth, own: list[dict[str, Any]], devices: list[DeviceHealth]
) -> str:
    if health.drained:
        return HostState.DRAINED
    level = rules.worst([reason["level"] for reason in own])
    if level == rules.OFFLINE:
        return HostState.OFFLINE
    if level == rules.UNHEALTHY:
        return HostState.UNHEALTHY
    closed = sum(1 for device in devices if device.closed)
    if closed and closed >= max(host.device_count, 1):
        return HostState.UNHEALTHY  # nothing left to place a run on
    if level == rules.DEGRADED or any(device.state != DeviceState.HEALTHY for device in devices):
        return HostState.DEGRADED
    return HostState.HEALTHY


# -- transitions -------------------------------------------------------------


def _fingerprint(row: HostHealth | DeviceHealth) -> str:
    """What a save would write that matters: a row that did not change is not written.

    The sweep and every telemetry batch evaluate hosts that mostly did not change.
    """
    fields = [row.state, row.reasons, row.rule_state]
    if isinstance(row, HostHealth):
        fields += [row.drained, row.drain_note, row.drained_by_id, row.drained_at]
    return json.dumps(fields, sort_keys=True, default=str)


def _locked_health(host: Host) -> HostHealth:
    # One query when the row exists (every call but a host's first): each telemetry batch
    # comes here.
    try:
        health = HostHealth.objects.select_for_update().get(host=host)
    except HostHealth.DoesNotExist:
        HostHealth.objects.get_or_create(host=host)
        health = HostHealth.objects.select_for_update().get(host=host)
    health.host = host
    health.loaded = _fingerprint(health)
    return health


def _change(
    host: Host,
    device: int | None,
    previous: str,
    state: str,
    reasons: list[dict[str, Any]],
    now: datetime,
    by: AbstractBaseUser | None,
    note: str,
) -> HealthChange:
    change = HealthChange.objects.create(
        host=host,
        device=device,
        previous=previous,
        state=state,
        reasons=reasons,
        at=now,
        by=by if by is not None and by.is_authenticated else None,
        note=note,
    )
    transaction.on_commit(lambda: _send_webhook(change.pk))
    return change


def _save_device(
    device: DeviceHealth, now: datetime, by: AbstractBaseUser | None, note: str
) -> bool:
    """Save a device's new reasons; True when its state changed (recorded)."""
    state = _device_state(device)
    changed = state != device.state
    if changed:
        _change(device.host, device.index, device.state, state, device.reasons, now, by, note)
        device.state = state
        device.changed_at = now
    if changed or getattr(device, "loaded", None) != _fingerprint(device):
        device.save()
    return changed


def _settle(
    health: HostHealth,
    now: datetime,
    by: AbstractBaseUser | None = None,
    note: str = "",
    reopened: bool = False,
    devices: list[DeviceHealth] | None = None,
) -> bool:
    """Run the host rules, roll the devices up, save; True when the host's state changed.

    ``devices``: every device of the host as the caller just saved them, in index order;
    read here when not given.
    """
    host = health.host
    findings = {
        rule.name: rule.check(host, health.rule_state.setdefault(rule.name, {}), now)
        for rule in rules.HOST_RULES.values()
    }
    own = _merge(
        [reason for reason in health.reasons if reason["device"] is None], findings, None, now
    )
    if devices is None:
        devices = list(DeviceHealth.objects.filter(host=host).order_by("index"))
    device_reasons = [reason for device in devices for reason in device.reasons]
    previous = health.state
    state = _host_state(host, health, own, devices)
    health.reasons = own + device_reasons
    changed = state != previous
    if changed:
        _change(host, None, previous, state, health.reasons, now, by, note)
        health.state = state
        health.changed_at = now
        reopened = reopened or previous in HOST_STATES_CLOSED
    if changed or getattr(health, "loaded", None) != _fingerprint(health):
        health.save()
    if reopened and health.state not in HOST_STATES_CLOSED:
        transaction.on_commit(_request_placement)
    return changed


def _request_placement() -> None:
    # Health sits below runs: it asks by task name (workers.contract.tasks), as a host would.
    try:
        app.send_task(PLACE_RUNS, queue=CONTROL_QUEUE)
    except Exception:
        log.exception("could not request placement; the scheduler tick will retry")


def _send_webhook(change_id: int) -> None:
    from django.conf import settings

    if not settings.NPULAB["HEALTH_WEBHOOK_URL"]:
        return
    try:
        app.send_task(DELIVER_HEALTH_WEBHOOK, args=[change_id], queue=CONTROL_QUEUE)
    except Exception:
        log.exception("could not queue the health webhook for change %s", change_id)


# -- telemetry -----------------------------------------------------------------


def record_samples(host: Host, samples: list[dict[str, Any]], now: datetime | None = None) -> None:
    """Apply the device rules to a batch of validated samples, oldest first."""
    device_samples = [sample for sample in samples if sample.get("index") is not None]
    now = now or timezone.now()
    with transaction.atomic():
        health = _locked_health(host)
        indices = sorted({sample["index"] for sample in device_samples})
        # All the host's devices, not only the batch's: _settle rolls them all up.
        existing = {device.index: device for device in _devices_of(host)}
        missing = [DeviceHealth(host=host, index=i) for i in indices if i not in existing]
        DeviceHealth.objects.bulk_create(missing, ignore_conflicts=True)
        if missing:
            existing = {device.index: device for device in _devices_of(host)}
        reopened = False
        for index in indices:
            device = existing[index]
            device.host = host
            device.loaded = _fingerprint(device)
            was_closed = device.closed
            for sample in (s for s in device_samples if s["index"] == index):
                findings = {
                    rule.name: rule.check(sample, device.rule_state.setdefault(rule.name, {}))
                    for rule in rules.DEVICE_RULES.values()
                }
                device.reasons = _merge(device.reasons, findings, index, now)
            _save_device(device, now, None, "")
            reopened = reopened or (was_closed and not device.closed)
        _settle(health, now, reopened=reopened, devices=list(existing.values()))


def _devices_of(host: Host) -> list[DeviceHealth]:
    return list(DeviceHealth.objects.filter(host=host).order_by("index"))


def on_samples_recorded(
    sender: Any, host: Host, samples: list[dict[str, Any]], **kwargs: Any
) -> None:
    """The receiver of ``npulab.telemetry.signals.samples_recorded``."""
    record_samples(host, samples)


# -- the control plane ------------------------------------------------------


def evaluate_host(host: Host, now: datetime | None = None) -> bool:
    """Run the host rules again (heartbeat age, failures leaving the window)."""
    with transaction.atomic():
        return _settle(_locked_health(host), now or timezone.now())


def sweep_health(now: datetime | None = None) -> int:
    """Evaluate every host; returns how many changed state."""
    now = now or timezone.now()
    return sum(evaluate_host(host, now) for host in Host.objects.all())


def record_infrastructure_failure(
    host: Host, run_id: int | None, cause: str, when: datetime | None = None
) -> None:
    """A run on ``host`` ended with an infrastructure cause: count it toward the frequency rule.

    Called by the runs app inside the transaction that ends the attempt.
    """
    when = when or timezone.now()
    health = _locked_health(host)
    memory = health.rule_state.setdefault(rules.InfrastructureFailures.name, {})
    rules.InfrastructureFailures.add(memory, when, run_id, cause)
    _settle(health, when)


def mark_device_bad(host: Host, index: int, reason: str, *, run: Any = None) -> None:
    """Mark one device bad (a stability run failed on it); its host becomes degraded.

    It stays bad, and gets no new run, until an operator clears it. ``run`` (a
    Run, or its id) is named in the reason and the audit log.
    """
    now = timezone.now()
    run_id = getattr(run, "pk", run)
    detail = reason.strip()[:500] or "marked bad"
    if run_id is not None:
        detail = f"{detail} (run {run_id})"
    with transaction.atomic():
        health = _locked_health(host)
        device, _ = DeviceHealth.objects.get_or_create(host=host, index=index)
        device.host = host
        finding = rules.Finding(rules.BAD, detail)
        device.reasons = _merge(device.reasons, {rules.MARKED_BAD: finding}, index, now)
        _save_device(device, now, None, detail)
        _settle(health, now, note=detail)
        record(
            actions.HEALTH_MARK_DEVICE_BAD,
            target_type=AUDIT_TARGET,
            target_id=host.pk,
            target_label=f"{host.name} device {index}",
            note=detail,
            data={"device": index, "run": run_id},
        )


def do_clear_device(host: Host, index: int, user: AbstractBaseUser, note: str = "") -> DeviceHealth:
    """An operator puts a device back: its bad mark goes and its error counts start afresh."""
    now = timezone.now()
    with transaction.atomic():
        health = _locked_health(host)
        try:
            device = DeviceHealth.objects.select_for_update().get(host=host, index=index)
        except DeviceHealth.DoesNotExist:
            raise Conflict(f"device {index} of host {host.name} has no health record") from None
        device.host = host
        for name in (rules.MARKED_BAD, *(r.name for r in rules.DEVICE_RULES.values())):
            memory = device.rule_state.get(name)
            if isinstance(memory, dict) and "last" in memory:
                memory["baseline"] = memory["last"]
        device.reasons = [
            reason
            for reason in device.reasons
            if reason["rule"] == rules.ChipHealth.name or reason["rule"] == rules.Temperature.name
        ]
        note = note.strip()[:MAX_NOTE_CHARS]
        _save_device(device, now, user, note)
        _settle(health, now, by=user, note=note, reopened=True)
        record(
            actions.HEALTH_CLEAR_DEVICE,
            user=user,
            target_type=AUDIT_TARGET,
            target_id=host.pk,
            target_label=f"{host.name} device {index}",
            note=note,
            data={"device": index},
        )
    return device


def do_drain_host(host: Host, user: AbstractBaseUser, note: str) -> HostHealth:
    """Place no new run on ``host``; what runs there finishes. ``note`` says why (required)."""
    note = (note or "").strip()[:MAX_NOTE_CHARS]
    now = timezone.now()
    with transaction.atomic():
        health = _locked_health(host)
        if health.drained:
            by = health.drained_by.get_username() if health.drained_by else "someone"
            raise Conflict(f"host {host.name} is already drained by {by}: {health.drain_note}")
        health.drained = True
        health.drain_note = note
        health.drained_by = user if user.is_authenticated else None
        health.drained_at = now
        _settle(health, now, by=user, note=note)
        record(
            actions.HEALTH_DRAIN,
            user=user,
            target_type=AUDIT_TARGET,
            target_id=host.pk,
            target_label=host.name,
            note=note,
        )
    return health


def do_undrain_host(host: Host, user: AbstractBaseUser, note: str = "") -> HostHealth:
    """Take the drain back: the rules decide the host's state again."""
    note = (note or "").strip()[:MAX_NOTE_CHARS]
    now = timezone.now()
    with transaction.atomic():
        health = _locked_health(host)
        if not health.drained:
            raise Conflict(f"host {host.name} is not drained")
        drained = {
            "note": health.drain_note,
            "at": iso(health.drained_at) if health.drained_at else None,
        }
        health.drained = False
        health.drain_note = ""
        health.drained_by = None
        health.drained_at = None
        _settle(health, now, by=user, note=note, reopened=True)
        record(
            actions.HEALTH_UNDRAIN,
            user=user,
            target_type=AUDIT_TARGET,
            target_id=host.pk,
            target_label=host.name,
            note=note,
            data={"drained": drained},
        )
    return health
