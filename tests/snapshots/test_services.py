from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from npulab.snapshots.content import SnapshotInvalid
from npulab.snapshots.models import HostVersion, Snapshot
from npulab.snapshots.services import do_record_snapshot, do_request_snapshot

pytestmark = pytest.mark.django_db


def test_identical_uploads_are_stored_once(cpu_host, document) -> None:
    start = timezone.now()
    first = do_record_snapshot(cpu_host, document(), now=start)
    again = document()
    again["npu"]["chips"][0]["temp_c"] = 70.0  # a reading: same environment
    second = do_record_snapshot(cpu_host, again, now=start + timedelta(hours=1))
    assert (first.new_version, second.new_version) == (True, False)
    assert Snapshot.objects.count() == HostVersion.objects.count() == 1
    version = HostVersion.objects.get()
    assert (version.first_seen, version.last_seen) == (start, start + timedelta(hours=1))
    assert version.change == "first snapshot"
    assert version.telemetry["chips"][0]["temp_c"] == 70.0
    snapshot = Snapshot.objects.get()
    assert snapshot.last_seen == start + timedelta(hours=1)
    assert snapshot.summary["cann"] == "8.1.RC1"


def test_a_change_is_a_new_version_with_what_changed(cpu_host, document) -> None:
    now = timezone.now()
    do_record_snapshot(cpu_host, document(torch_npu="2.1.0.post8"), now=now)
    recorded = do_record_snapshot(
        cpu_host, document(torch_npu="2.5.1"), now=now + timedelta(days=1)
    )
    assert recorded.new_version
    assert recorded.version.change == "torch_npu 2.1.0.post8 → 2.5.1, ~1 packages"
    assert recorded.version.previous.snapshot.summary["torch_npu"] == "2.1.0.post8"


def test_going_back_to_earlier_content_is_a_new_step_of_the_history(cpu_host, document) -> None:
    now = timezone.now()
    old = do_record_snapshot(cpu_host, document(torch_npu="2.1.0.post8"), now=now)
    do_record_snapshot(cpu_host, document(torch_npu="2.5.1"), now=now + timedelta(days=1))
    back = do_record_snapshot(
        cpu_host, document(torch_npu="2.1.0.post8"), now=now + timedelta(days=2)
    )
    assert back.snapshot == old.snapshot  # stored once ...
    assert HostVersion.objects.filter(host=cpu_host).count() == 3  # ... seen in three steps
    assert back.version.change == "torch_npu 2.5.1 → 2.1.0.post8, ~1 packages"


def test_each_python_environment_has_its_own_history(cpu_host, document) -> None:
    conda = document()
    conda["python"]["executable"] = "/opt/conda/envs/npu/bin/python"
    do_record_snapshot(cpu_host, document())
    do_record_snapshot(cpu_host, conda)
    do_record_snapshot(cpu_host, document())
    assert HostVersion.objects.filter(host=cpu_host).count() == 2


def test_an_invalid_upload_stores_nothing(cpu_host, document) -> None:
    do_record_snapshot(cpu_host, document())
    broken = document()
    del broken["python"]
    with pytest.raises(SnapshotInvalid):
        do_record_snapshot(cpu_host, broken)
    assert Snapshot.objects.count() == HostVersion.objects.count() == 1


def test_a_requested_snapshot_clears_the_request(cpu_host, document) -> None:
    do_request_snapshot(cpu_host)
    cpu_host.refresh_from_db()
    assert cpu_host.snapshot_requested
    do_record_snapshot(cpu_host, document())
    cpu_host.refresh_from_db()
    assert not cpu_host.snapshot_requested
