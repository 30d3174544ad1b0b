"""The agent's write paths: the steps that join hosts, runs and snapshots."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied

from npulab.agent.services import (
    do_record_host_heartbeat,
    do_register_host_worker,
    do_upload_snapshot,
)
from npulab.hosts.models import Host
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import do_submit_run
from npulab.snapshots.models import Snapshot
from tests.factories import HostFactory

pytestmark = pytest.mark.django_db
PLACE = {"task": "runs.place_runs", "args": [], "queue": "control"}
FACTS = {"device_type": "cpu", "devices": [{"index": 0, "name": "cpu-0"}]}


def test_a_registering_host_asks_for_placement(sent_tasks, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        do_register_host_worker(HostFactory(name="cpu-07"), FACTS)
    assert sent_tasks == [PLACE]


def test_a_host_that_comes_back_asks_for_placement(
    cpu_host, sent_tasks, django_capture_on_commit_callbacks
) -> None:
    Host.objects.filter(pk=cpu_host.pk).update(status=Host.Status.OFFLINE)
    cpu_host.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        do_record_host_heartbeat(cpu_host, [])
    assert sent_tasks == [PLACE]
    cpu_host.refresh_from_db()
    assert cpu_host.status == Host.Status.ONLINE


def test_an_online_hosts_heartbeat_asks_for_nothing(
    cpu_host, sent_tasks, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        do_record_host_heartbeat(cpu_host, [])
    assert sent_tasks == []


def test_an_upload_names_the_run_it_was_taken_for(cpu_host, owner, document) -> None:
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu"})
    place_queued_runs()
    recorded = do_upload_snapshot(cpu_host, document(), run_id=run.pk)
    run.refresh_from_db()
    assert run.snapshot == recorded.snapshot


def test_a_host_cannot_attach_a_snapshot_to_another_hosts_run(cpu_host, owner, document) -> None:
    other = Host.objects.create(name="cpu-02")
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu"})
    place_queued_runs()
    with pytest.raises(PermissionDenied):
        do_upload_snapshot(other, document(), run_id=run.pk)
    assert Snapshot.objects.count() == 0  # the whole upload is rolled back
