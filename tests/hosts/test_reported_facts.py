"""A host's word about itself: its labels are shown apart, its devices wait for proof.

Before: a host token re-registered as ``npu`` with the labels ``910b, prod``, replaced
the labels an operator had set, and was sent a run meant for real NPU hosts with its
secret env in clear.
"""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from npulab.audit import actions
from npulab.audit.models import AuditEntry
from npulab.hosts.models import Host
from npulab.hosts.services import do_accept_host_devices, do_issue_host_token
from npulab.projects.services import do_create_pool
from npulab.runs.models import Run
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import do_submit_run
from tests.conftest import make_operator
from tests.factories import HostFactory

pytestmark = pytest.mark.django_db
AGENT = "/api/v1/agent"
FAKE_NPU = {
    "device_type": "npu",
    "devices": [{"index": i, "name": "Ascend 910B3"} for i in range(2)],
    "labels": ["910b", "prod"],
}


def host_client(host: Host) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {do_issue_host_token(host)}")
    return client


def snapshot_with_chips(document: Any, chips: int) -> dict[str, Any]:
    """The collected snapshot (npu-smi of an 8-card A2) with its first ``chips`` chips."""
    doc = document()
    doc["npu"]["chips"] = doc["npu"]["chips"][:chips]
    return doc


@pytest.fixture
def cpu_box(db: None) -> Host:
    """A host an operator made as a CPU box with its labels."""
    return HostFactory(name="box-01", labels=["cpu-lab"])


def test_registration_keeps_the_operators_labels_and_shows_the_hosts_apart(
    cpu_box, client, staff
) -> None:
    assert (
        host_client(cpu_box).post(f"{AGENT}/register/", FAKE_NPU, format="json").status_code == 200
    )
    cpu_box.refresh_from_db()
    assert cpu_box.labels == ["cpu-lab"]
    assert cpu_box.reported_labels == ["910b", "prod"]
    client.force_login(staff)
    page = client.get(f"/hosts/{cpu_box.name}/").content.decode()
    assert "Reported labels" in page
    assert "prod" in page


def test_devices_no_snapshot_backs_wait_for_an_operator(cpu_box, owner, staff, document) -> None:
    agent = host_client(cpu_box)
    agent.post(f"{AGENT}/register/", FAKE_NPU, format="json")
    run = do_submit_run(
        owner, {"kind": "smoke", "device_type": "npu", "env": {"WANDB_API_KEY": "w"}}
    )
    place_queued_runs()
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    assert "waiting for an operator to accept" in run.queue_reason
    # Its own snapshot shows one chip: still not two.
    agent.post(f"{AGENT}/snapshots/", {"snapshot": snapshot_with_chips(document, 1)}, format="json")
    cpu_box.refresh_from_db()
    assert "its snapshot shows 1" in cpu_box.devices_unverified
    operator = make_operator(staff)
    do_accept_host_devices(cpu_box, by=operator)
    place_queued_runs()
    run.refresh_from_db()
    assert run.host == cpu_box
    assert AuditEntry.objects.filter(action=actions.HOST_ACCEPT_DEVICES).count() == 1


def test_devices_the_hosts_own_snapshot_shows_are_believed(cpu_box, document) -> None:
    agent = host_client(cpu_box)
    agent.post(f"{AGENT}/register/", FAKE_NPU, format="json")
    cpu_box.refresh_from_db()
    assert cpu_box.devices_unverified
    agent.post(f"{AGENT}/snapshots/", {"snapshot": snapshot_with_chips(document, 2)}, format="json")
    cpu_box.refresh_from_db()
    assert cpu_box.devices_unverified == ""
    # Registering the same again needs nothing more.
    agent.post(f"{AGENT}/register/", FAKE_NPU, format="json")
    cpu_box.refresh_from_db()
    assert cpu_box.devices_unverified == ""


def test_a_host_outside_the_projects_pools_never_gets_the_runs_secrets(
    owner, cpu_host, staff
) -> None:
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu", "env": {"API_KEY": "s3"}})
    place_queued_runs()
    run.refresh_from_db()
    assert run.host == cpu_host
    # Moved to a pool the run's project may not use, between placement and claim.
    Host.objects.filter(pk=cpu_host.pk).update(pool=do_create_pool(make_operator(staff), "other"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {do_issue_host_token(cpu_host)}")
    response = client.post(f"{AGENT}/runs/{run.pk}/claim/", {"attempt": 1}, format="json")
    assert response.status_code == 409
    assert "s3" not in response.content.decode()
    run.refresh_from_db()
    assert run.status == Run.Status.DISPATCHED
