from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from npulab.hosts.models import Host
from npulab.hosts.services import do_issue_host_token
from npulab.runs.models import Run
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import do_cancel_run, do_submit_run
from tests.conftest import register
from tests.factories import HostFactory

pytestmark = pytest.mark.django_db
AGENT = "/api/v1/agent"
FACTS = {
    "device_type": "npu",
    "devices": [
        {"index": 1, "name": "Ascend 910B3", "npu": 1},
        {"index": 0, "name": "Ascend 910B3"},
    ],
    "hostname": "npu-07.lab",
    "worker_version": "0.1.0",
    "python": "3.10.12",
    "labels": ["910b"],
}


def host_client(host: Host) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {do_issue_host_token(host)}")
    return client


def test_register_records_the_host_and_names_its_queue() -> None:
    host = HostFactory(name="npu-07")
    response = host_client(host).post(f"{AGENT}/register/", FACTS, format="json")
    assert response.status_code == 200
    assert response.json() == {"name": "npu-07", "queue": "host.npu-07"}
    host.refresh_from_db()
    assert (host.device_type, host.device_count, host.status, host.reported_labels) == (
        "npu",
        2,
        "online",
        ["910b"],
    )
    assert host.devices[1] == {"index": 1, "name": "Ascend 910B3", "npu": 1}


def test_register_refuses_gaps_in_device_numbering() -> None:
    host = HostFactory(name="npu-07")
    facts = dict(FACTS, devices=[{"index": 0, "name": "a"}, {"index": 2, "name": "b"}])
    response = host_client(host).post(f"{AGENT}/register/", facts, format="json")
    assert response.status_code == 400
    assert "devices" in response.json()


def test_user_tokens_cannot_use_the_agent_api(api) -> None:
    response = api.post(f"{AGENT}/register/", FACTS, format="json")
    assert response.status_code == 403


def test_a_replaced_host_token_stops_working() -> None:
    host = HostFactory(name="npu-07")
    old = host_client(host)
    do_issue_host_token(host)
    assert old.post(f"{AGENT}/heartbeat/", {"running": []}, format="json").status_code == 401


def test_a_host_touches_only_its_own_runs(owner, cpu_host, host_api) -> None:
    stranger = register(HostFactory(name="cpu-02"), "cpu", 1)
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu", "host": "cpu-02"})
    place_queued_runs()
    assert Run.objects.get(pk=run.pk).host == stranger
    for path, body in (
        ("claim", {"attempt": 1}),
        ("events", {"attempt": 1, "start": 0, "end": 0, "events": []}),
        ("finish", {"attempt": 1, "exit_code": 0}),
    ):
        response = host_api.post(f"{AGENT}/runs/{run.pk}/{path}/", body, format="json")
        assert response.status_code == 403, path
        assert response.json()["detail"] == f"run {run.pk} is not placed on host cpu-01"
    assert (
        host_api.post(f"{AGENT}/runs/999999/claim/", {"attempt": 1}, format="json").status_code
        == 404
    )


def test_claim_events_finish_over_http(owner, cpu_host, host_api) -> None:
    run = do_submit_run(
        owner, {"kind": "smoke", "device_type": "cpu", "env": {"TOKEN": "t0ps3cret"}}
    )
    place_queued_runs()
    claim = host_api.post(f"{AGENT}/runs/{run.pk}/claim/", {"attempt": 1}, format="json").json()
    # The host gets the real environment; users see it redacted.
    assert claim["spec"]["env"] == {"TOKEN": "t0ps3cret"}
    assert claim["devices"] == [0]

    events = [{"type": "result", "time": 3.0, "status": "succeeded", "reason": "ok", "summary": {}}]
    batch = {"attempt": 1, "start": 0, "end": 120, "events": events}
    # Pinned checkpoint steps come only to runs of kinds with checkpoints (not smoke).
    assert host_api.post(f"{AGENT}/runs/{run.pk}/events/", batch, format="json").json() == {
        "ack": 120,
        "cancel": False,
    }
    gap = {"attempt": 1, "start": 500, "end": 600, "events": [{"type": "heartbeat", "time": 4.0}]}
    response = host_api.post(f"{AGENT}/runs/{run.pk}/events/", gap, format="json")
    assert response.status_code == 409
    assert response.json()["expected_start"] == 120

    response = host_api.post(
        f"{AGENT}/runs/{run.pk}/finish/", {"attempt": 1, "exit_code": 0}, format="json"
    )
    assert response.json() == {"status": "succeeded", "exit_cause": "completed"}


@pytest.mark.parametrize(
    ("batch", "field"),
    [
        ({"attempt": 1, "start": 10, "end": 5, "events": []}, "end"),
        ({"attempt": 1, "start": 0, "end": 0, "events": [{"type": "log"}]}, "end"),
        ({"attempt": 1, "start": 0, "end": 1, "events": {"type": "log"}}, "events"),
        ({"attempt": 0, "start": 0, "end": 1, "events": []}, "attempt"),
    ],
)
def test_bad_event_batches_are_400(owner, cpu_host, host_api, batch: dict, field: str) -> None:
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu"})
    place_queued_runs()
    host_api.post(f"{AGENT}/runs/{run.pk}/claim/", {"attempt": 1}, format="json")
    response = host_api.post(f"{AGENT}/runs/{run.pk}/events/", batch, format="json")
    assert response.status_code == 400
    assert field in response.json()


def test_heartbeat_names_the_runs_to_stop(owner, cpu_host, host_api) -> None:
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu"})
    place_queued_runs()
    host_api.post(f"{AGENT}/runs/{run.pk}/claim/", {"attempt": 1}, format="json")
    beat = {"running": [run.pk]}
    assert host_api.post(f"{AGENT}/heartbeat/", beat, format="json").json()["cancel"] == []
    do_cancel_run(run.pk, owner)
    assert host_api.post(f"{AGENT}/heartbeat/", beat, format="json").json()["cancel"] == [run.pk]


def test_the_host_list_shows_busy_devices(api, owner, cpu_host) -> None:
    do_submit_run(owner, {"kind": "smoke", "device_type": "cpu"})
    place_queued_runs()
    hosts = api.get("/api/v1/hosts/").json()["results"]
    assert [(h["name"], h["device_count"], h["busy_devices"]) for h in hosts] == [("cpu-01", 1, 1)]
    assert api.get("/api/v1/hosts/cpu-01/").json()["busy_devices"] == 1


def test_a_host_that_keeps_runs_off_the_network_says_so_and_the_page_shows_it(
    client, staff
) -> None:
    host = HostFactory(name="npu-kept")
    agent = host_client(host)
    facts = {**FACTS, "network": {"advertise_address": "10.0.0.7", "run_network": "none"}}
    assert agent.post(f"{AGENT}/register/", facts, format="json").status_code == 200
    host.refresh_from_db()
    assert host.network == {"advertise_address": "10.0.0.7", "run_network": "none"}
    client.force_login(staff)
    page = client.get("/hosts/npu-kept/").content.decode()
    assert 'id="run-network">a loopback of their own only' in page
    bad = {**FACTS, "network": {"run_network": "off"}}
    refused = agent.post(f"{AGENT}/register/", bad, format="json")
    assert refused.status_code == 400
    assert "run_network" in refused.json()["network"]
