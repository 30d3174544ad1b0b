"""The agent's write paths: what a host worker's call changes across hosts, runs, snapshots.

Each lower app keeps its own write; the steps that join them (a host that
comes online asks for placement, an upload names its run) are made here.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from npulab.hosts.models import Host
from npulab.hosts.services import (
    do_check_host_devices,
    do_record_heartbeat,
    do_register_host,
)
from npulab.runs.dispatch import request_placement
from npulab.runs.services import do_attach_snapshot, do_reconcile_host_runs
from npulab.snapshots.services import Recorded, do_record_snapshot


def do_register_host_worker(host: Host, facts: dict[str, Any]) -> Host:
    """A host worker starts: record its host; queued runs may fit the new capacity."""
    host = do_register_host(host, facts)
    transaction.on_commit(request_placement)
    return host


def do_record_host_heartbeat(host: Host, running: list[int]) -> None:
    """The host is alive and runs ``running``; a host that came back may take queued runs."""
    if do_record_heartbeat(host):
        transaction.on_commit(request_placement)
    do_reconcile_host_runs(host, running)


@transaction.atomic
def do_upload_snapshot(host: Host, document: Any, run_id: int | None = None) -> Recorded:
    """Record the host's snapshot and, when it was taken for a run, point the run at it.

    A run that is not the host's raises PermissionDenied and the whole upload is
    rolled back.
    """
    recorded = do_record_snapshot(host, document)
    held = host.devices_unverified
    do_check_host_devices(host, recorded.snapshot.data)
    if held and not host.devices_unverified:
        transaction.on_commit(request_placement)  # the snapshot backs it: runs may come
    if run_id is not None:
        do_attach_snapshot(host, run_id, recorded.snapshot)
    return recorded
