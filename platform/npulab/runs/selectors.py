"""Read paths for runs shared by the pages and the API."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from npulab.hosts.models import Host
from npulab.runs.models import Run, RunEvent
from npulab.snapshots.diff import version_changes
from npulab.snapshots.models import Snapshot

LOG_TAIL_LINES = 200
RECENT_HOST_RUNS = 25
RECENT_SNAPSHOT_RUNS = 15


def can_cancel(user: AbstractBaseUser | AnonymousUser, run: Run) -> bool:
    return bool(user.is_authenticated and (user.is_staff or run.submitted_by_id == user.pk))


def log_tail(run: Run, lines: int = LOG_TAIL_LINES) -> list[RunEvent]:
    """The last ``lines`` log events, oldest first."""
    newest = RunEvent.objects.filter(run=run, type="log").order_by("-id")[:lines]
    return list(reversed(newest))


def steps(run: Run) -> list[RunEvent]:
    return list(RunEvent.objects.filter(run=run, type="step").order_by("id"))


def environment_differences(runs: list[Run]) -> list[dict[str, Any]]:
    """Each run's key versions, and which of them differ from the first run's.

    Runs compared on one chart (the same model on two CANN versions, say) are
    read together with what changed underneath them.
    """
    rows = []
    base = runs[0].snapshot.summary if runs and runs[0].snapshot else None
    for run in runs:
        summary = run.snapshot.summary if run.snapshot else None
        changes = version_changes(base, summary) if base is not None and summary is not None else []
        rows.append({"run": run, "summary": summary, "changes": changes})
    return rows


def host_runs_context(host: Host) -> dict[str, Any]:
    """The host page's runs: each device with the run leasing it, the newest runs there."""
    leases = {lease.device_index: lease.run for lease in host.leases.select_related("run")}
    devices = [dict(device, run=leases.get(device["index"])) for device in host.devices]
    runs = Run.objects.filter(host=host).select_related("submitted_by")[:RECENT_HOST_RUNS]
    return {"devices": devices, "runs": runs}


def snapshot_runs_context(snapshot: Snapshot) -> dict[str, Any]:
    """The snapshot page's runs: the newest that ran under it."""
    runs = Run.objects.filter(snapshot=snapshot).select_related("host")[:RECENT_SNAPSHOT_RUNS]
    return {"runs": runs}
