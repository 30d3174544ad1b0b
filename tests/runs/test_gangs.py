"""Runs across hosts: a gang is leased whole or not at all, claimed and ended host by host."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from npulab.core.errors import SubmissionInvalid
from npulab.health.services import do_drain_host
from npulab.hosts.models import Host
from npulab.hosts.services import do_issue_host_token, sweep_hosts
from npulab.runs.gangs import gang_of
from npulab.runs.models import DeviceLease, Placement, Run
from npulab.runs.placement import unsuited
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.selectors import chart_order, metric_keys
from npulab.runs.services import (
    do_cancel_run,
    do_claim_run,
    do_finish_run,
    do_ingest_events,
    do_reconcile_host_runs,
    do_submit_run,
    sweep_runs,
)
from npulab.series.owners import Owner
from npulab.series.reads import series
from npulab.snapshots.services import do_record_snapshot
from tests.conftest import register, token_client
from tests.factories import HostFactory
from tests.paths import TESTS_DIR
from tests.workers.fake_tool import FakeTool
from workers.contract.blocks import BLOCKS
from workers.events import EventWriter
from workers.host.packing import pack
from workers.host.preflight import preflight

pytestmark = pytest.mark.django_db


def host(name: str, devices: int = 2, device_type: str = "cpu", address: str = "") -> Host:
    network = {"advertise_address": address or f"10.0.0.{name[-1]}"}
    return register(HostFactory(name=name), device_type, devices, network=network)


def gang(owner: Any, hosts: int = 2, devices: int = 2, **extra: Any) -> Run:
    return do_submit_run(
        owner,
        {
            "kind": "training",
            "device_type": "cpu",
            "entry": "builtin:cnn",
            "hosts": hosts,
            "devices": devices,
            **extra,
        },
    )


def test_a_gang_is_leased_on_all_its_hosts_in_one_pass(
    owner, sent_tasks, django_capture_on_commit_callbacks
) -> None:
    a, b = host("cpu-1"), host("cpu-2")
    run = gang(owner)
    with django_capture_on_commit_callbacks(execute=True):
        assert place_queued_runs() == [run.pk]
    run.refresh_from_db()
    placements = list(run.placements.order_by("node_rank"))
    assert [(p.host_name, p.device_indices, p.rank_range) for p in placements] == [
        ("cpu-1", [0, 1], [0, 1]),
        ("cpu-2", [0, 1], [2, 3]),
    ]
    assert run.host == a
    assert run.shape == "2 × 2 cpu"
    assert DeviceLease.objects.filter(run=run).count() == 4
    assert placements[0].master_port is not None
    assert placements[1].master_port is None
    assert sorted(task["queue"] for task in sent_tasks) == ["host.cpu-1", "host.cpu-2"]
    assert {task["args"][0] for task in sent_tasks} == {run.pk}
    assert b in Host.objects.filter(placements__run=run)


def test_a_gang_that_does_not_fit_whole_leases_nothing_and_says_why(owner) -> None:
    host("cpu-1"), host("cpu-2"), host("cpu-3")
    busy = gang(owner, hosts=1)
    place_queued_runs()
    do_drain_host(Host.objects.get(name="cpu-3"), owner, "new disks")
    waiting = gang(owner, hosts=3)
    place_queued_runs()
    waiting.refresh_from_db()
    assert waiting.status == Run.Status.QUEUED
    assert not DeviceLease.objects.filter(run=waiting).exists()
    assert waiting.queue_reason == "needs 3 hosts × 2 cpu; 1 free, 1 busy, 1 drained"
    busy.refresh_from_db()
    assert busy.status == Run.Status.DISPATCHED


def test_a_gang_no_set_of_hosts_could_hold_is_refused_at_submit(owner) -> None:
    host("cpu-1"), host("cpu-2")
    with pytest.raises(SubmissionInvalid) as refused:
        gang(owner, hosts=3)
    assert "the run needs 3 hosts × 2 cpu; 2 such hosts could ever take it" in str(
        refused.value.errors["hosts"]
    )


def test_hosts_without_an_advertised_address_never_hold_a_gang(owner) -> None:
    host("cpu-1")
    register(HostFactory(name="cpu-2"), "cpu", 2)
    with pytest.raises(SubmissionInvalid) as refused:
        gang(owner)
    assert "1 such host could ever take it: cpu-1" in refused.value.errors["hosts"]


def test_hosts_that_keep_runs_off_the_network_take_no_gang_but_runs_on_one_host(owner) -> None:
    host("cpu-1")
    isolated = register(
        HostFactory(name="cpu-2"),
        "cpu",
        2,
        network={"advertise_address": "10.0.0.2", "run_network": "none"},
    )
    with pytest.raises(SubmissionInvalid) as refused:
        gang(owner)
    assert "1 such host could ever take it: cpu-1" in refused.value.errors["hosts"]
    host("cpu-3")
    across = gang(owner)
    assert "run_network none" in unsuited(across, isolated)
    alone = gang(owner, hosts=1, host="cpu-2")
    assert unsuited(alone, isolated) == ""
    place_queued_runs()
    across.refresh_from_db()
    alone.refresh_from_db()
    assert {p.host_name for p in across.placements.all()} == {"cpu-1", "cpu-3"}
    assert alone.host == isolated


def test_a_kind_that_runs_on_one_host_refuses_hosts(owner) -> None:
    host("cpu-1")
    with pytest.raises(SubmissionInvalid) as refused:
        do_submit_run(owner, {"kind": "smoke", "device_type": "cpu", "hosts": 2})
    assert refused.value.errors["hosts"] == "unknown field for a smoke run"


def agent_client(host: Host) -> APIClient:
    """A client with ``host``'s token: its worker's side of the agent API."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {do_issue_host_token(host)}")
    return client


def test_each_host_gets_the_rendezvous_and_its_own_ranks(owner) -> None:
    a, b = host("cpu-1", address="192.0.2.1"), host("cpu-2", address="192.0.2.2")
    run = gang(owner)
    place_queued_runs()
    first = do_claim_run(a, run.pk, 1)
    second = do_claim_run(b, run.pk, 1)
    one, two = gang_of(first, first.placement), gang_of(second, second.placement)
    assert one["master_addr"] == two["master_addr"] == "192.0.2.1"
    assert one["master_port"] == two["master_port"]
    assert (one["node_rank"], one["first_rank"], one["world_size"]) == (0, 0, 4)
    assert (two["node_rank"], two["first_rank"], two["local_world_size"]) == (1, 2, 2)
    assert "rank_table" not in two  # an NPU gang's only


def test_each_host_claims_with_every_peers_versions_from_its_newest_snapshot(
    owner, document
) -> None:
    a, b = host("cpu-1"), host("cpu-2")
    do_record_snapshot(a, document(torch="2.1.0"), now=timezone.now() - timezone.timedelta(hours=1))
    do_record_snapshot(a, document(torch="2.5.1", cann="8.0.RC3"))
    do_record_snapshot(b, document(torch="2.4.0", cann="8.2.RC1"))
    run = gang(owner)
    place_queued_runs()
    replies = []
    for claimer in (a, b):
        with CaptureQueriesContext(connection) as claim:
            response = agent_client(claimer).post(
                f"/api/v1/agent/runs/{run.pk}/claim/", {"attempt": 1}, format="json"
            )
        assert response.status_code == 200, response.content
        replies.append(response.json())
        statements = [query["sql"] for query in claim.captured_queries]
        # The peers' versions come from the snapshots' summaries, never their data (every
        # package and the environment), and the gang's placements are read with their
        # hosts once for the whole reply.
        assert not [sql for sql in statements if '"snapshots_snapshot"."data"' in sql]
        assert len([sql for sql in statements if 'JOIN "hosts_host"' in sql]) == 1
    for reply in replies:
        versions = [peer["versions"] for peer in reply["gang"]["peers"]]
        assert (versions[0]["torch"], versions[0]["cann"]) == ("2.5.1", "8.0.RC3")
        assert (versions[1]["torch"], versions[1]["cann"]) == ("2.4.0", "8.2.RC1")


def test_an_npu_gang_gets_a_rank_table_from_the_hosts_inventory(owner) -> None:
    hosts = []
    for n in (1, 2):
        devices = [{"index": i, "name": "910B", "ip": f"192.168.10{n}.{i + 1}"} for i in range(2)]
        hosts.append(
            Host.objects.get(
                pk=register(
                    HostFactory(name=f"npu-{n}"),
                    "npu",
                    2,
                    network={"advertise_address": f"192.0.2.{n}", "hccl_if_ip": f"192.0.2.{n}"},
                ).pk
            )
        )
        hosts[-1].devices = devices
        hosts[-1].save()
    run = npu_gang(owner)
    place_queued_runs()
    claimed = do_claim_run(hosts[1], run.pk, 1)
    reply = gang_of(claimed, claimed.placement)
    assert reply["hccl"] == {"if_ip": "192.0.2.2", "socket_ifname": "", "connect_timeout": 600}
    table = reply["rank_table"]
    assert table["version"] == "1.0"
    assert table["server_count"] == "2"
    assert table["server_list"][1] == {
        "server_id": "192.0.2.2",
        "device": [
            {"device_id": "0", "device_ip": "192.168.102.1", "rank_id": "2"},
            {"device_id": "1", "device_ip": "192.168.102.2", "rank_id": "3"},
        ],
    }


def a3_host(n: int, devices: list[dict[str, Any]]) -> Host:
    """An NPU host registered through the agent API, as its worker reports itself."""
    host = HostFactory(name=f"npu-{n}")
    host.accepted_device_type, host.accepted_device_count = "npu", len(devices)
    host.save()
    client = agent_client(host)
    facts = {
        "device_type": "npu",
        "devices": devices,
        "network": {"advertise_address": f"192.0.2.{n}"},
    }
    assert client.post("/api/v1/agent/register/", facts, format="json").status_code == 200
    return Host.objects.get(pk=host.pk)


def npu_gang(owner: Any) -> Run:
    return do_submit_run(
        owner,
        {
            "kind": "training",
            "device_type": "npu",
            "entry": "builtin:cnn",
            "hosts": 2,
            "devices": 2,
        },
    )


def test_an_a3_gang_gets_a_rank_table_of_version_1_2(owner) -> None:
    # Each chip as an A3 worker registers it: its IP, SDID and super pod (MindCluster's
    # A3 hccl.json SDIDs, tests/fixtures/spod_info/README.md).
    first = a3_host(
        1,
        [
            {
                "index": 0,
                "name": "Ascend910",
                "ip": "10.20.0.2",
                "sdid": 37748736,
                "super_pod_id": 0,
            },
            {
                "index": 1,
                "name": "Ascend910",
                "ip": "10.20.0.3",
                "sdid": 37814273,
                "super_pod_id": 0,
            },
        ],
    )
    second = a3_host(
        2,
        [
            {"index": 0, "name": "Ascend910", "sdid": 41943040, "super_pod_id": 0},
            {"index": 1, "name": "Ascend910", "sdid": 42008577, "super_pod_id": 0},
        ],
    )
    run = npu_gang(owner)
    place_queued_runs()
    claimed = do_claim_run(second, run.pk, 1)
    reply = gang_of(claimed, claimed.placement)
    table = reply["rank_table"]
    assert table["version"] == "1.2"
    assert [server["server_id"] for server in table["server_list"]] == ["192.0.2.1", "192.0.2.2"]
    assert table["server_list"][0]["device"][1] == {
        "device_id": "1",
        "super_device_id": "37814273",
        "device_ip": "10.20.0.3",
        "rank_id": "1",
    }
    assert table["server_list"][1]["device"][0] == {
        "device_id": "0",
        "super_device_id": "41943040",
        "rank_id": "2",
    }
    assert table["super_pod_list"] == [
        {
            "super_pod_id": "0",
            "server_list": [{"server_id": "192.0.2.1"}, {"server_id": "192.0.2.2"}],
        }
    ]
    assert [peer["super_device_ids"] for peer in reply["peers"]] == [
        {"0": 37748736, "1": 37814273},
        {"0": 41943040, "1": 42008577},
    ]
    assert preflight(dict(reply, node_rank=1), [], "npu") == []
    assert first.devices[0]["sdid"] == 37748736


def test_a_gang_of_a3_and_other_npu_hosts_is_refused_naming_them(owner) -> None:
    a3_host(
        1,
        [
            {"index": 0, "name": "Ascend910", "sdid": 37748736, "super_pod_id": 0},
            {"index": 1, "name": "Ascend910", "sdid": 37814273, "super_pod_id": 0},
        ],
    )
    other = a3_host(2, [{"index": 0, "name": "Ascend 910B4"}, {"index": 1, "name": "Ascend 910B4"}])
    run = npu_gang(owner)
    place_queued_runs()
    claimed = do_claim_run(other, run.pk, 1)
    reply = gang_of(claimed, claimed.placement)
    assert reply["rank_table"]["version"] == "1.0"
    assert preflight(dict(reply, node_rank=1), [], "npu") == [
        "super pod hardware differs across hosts: npu-1 has an SDID for every device "
        "(Atlas A3); npu-2 has no SDID (no super pod) (npu-smi info -t spod-info)"
    ]


def test_in_containers_hccn_tool_and_the_rank_table_get_the_physical_ids(
    owner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two A3 servers, each running its worker in a container that maps two of its
    devices: npu-smi numbers them 0 and 1, their physical ids are 4, 5 and 6, 7."""
    first = a3_host(
        1,
        [
            {"index": 0, "name": "Ascend910", "phy_id": 4, "ip": "10.20.0.6"},
            {"index": 1, "name": "Ascend910", "phy_id": 5, "ip": "10.20.0.7"},
        ],
    )
    second = a3_host(
        2,
        [
            {"index": 0, "name": "Ascend910", "phy_id": 6, "ip": "10.20.0.24"},
            {"index": 1, "name": "Ascend910", "phy_id": 7, "ip": "10.20.0.25"},
        ],
    )
    assert [device["phy_id"] for device in first.devices] == [4, 5]
    run = npu_gang(owner)
    place_queued_runs()
    claimed = do_claim_run(second, run.pk, 1)
    reply = gang_of(claimed, claimed.placement)
    assert [
        [(d["device_id"], d["rank_id"]) for d in server["device"]]
        for server in reply["rank_table"]["server_list"]
    ] == [[("4", "0"), ("5", "1")], [("6", "2"), ("7", "3")]]
    # The second host's pre-flight asks hccn_tool about its own devices 6 and 7.
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    output = TESTS_DIR / "fixtures" / "hccn_tool"
    hccn_tool = FakeTool(tmp_path, "hccn_tool")
    hccn_tool.answer("*-link*", output / "link-g_up.txt")
    hccn_tool.answer("*-ping*", output / "ping-g_reachable.txt")
    assert preflight(reply, claimed.placement.device_indices, "npu") == []
    assert hccn_tool.calls() == [
        "-i 6 -link -g",
        "-i 7 -link -g",
        "-i 6 -ping -g address 10.20.0.6",
        "-i 6 -ping -g address 10.20.0.7",
    ]


def test_the_host_page_says_where_a_physical_id_is_unknown(owner, client) -> None:
    a3_host(1, [{"index": 0, "name": "Ascend910", "phy_id": 4}, {"index": 1, "name": "910B4"}])
    client.force_login(owner)
    page = client.get("/hosts/npu-1/").content.decode()
    assert "physical 4" in page
    assert page.count("physical id unknown") == 1


def test_the_agent_api_refuses_a_physical_id_that_is_no_id() -> None:
    host = HostFactory(name="npu-9")
    client = agent_client(host)
    facts = {"device_type": "npu", "devices": [{"index": 0, "name": "Ascend910", "phy_id": -1}]}
    response = client.post("/api/v1/agent/register/", facts, format="json")
    assert response.status_code == 400
    assert "phy_id" in str(response.json())


def test_the_agent_api_refuses_an_sdid_that_is_no_number() -> None:
    host = HostFactory(name="npu-9")
    client = agent_client(host)
    facts = {"device_type": "npu", "devices": [{"index": 0, "name": "Ascend910", "sdid": "x"}]}
    response = client.post("/api/v1/agent/register/", facts, format="json")
    assert response.status_code == 400
    assert "sdid" in str(response.json())


def _started(owner: Any) -> tuple[Run, Host, Host]:
    a, b = host("cpu-1"), host("cpu-2")
    run = gang(owner)
    place_queued_runs()
    do_claim_run(a, run.pk, 1)
    do_claim_run(b, run.pk, 1)
    return run, a, b


def test_one_failed_host_stops_the_others_and_names_itself_and_its_first_rank(owner) -> None:
    run, a, b = _started(owner)
    failure = {"type": "result", "time": 1.0, "status": "failed", "reason": "segfault"}
    do_ingest_events(b, run.pk, 1, 0, 10, [failure])
    ack = do_ingest_events(a, run.pk, 1, 0, 0, [])
    assert ack["cancel"] is False
    do_finish_run(b, run.pk, 1, {"exit_code": 1, "exited_at": timezone.now().timestamp()})
    # The other host learns to stop with its next acknowledgement.
    assert do_ingest_events(a, run.pk, 1, 0, 0, [])["cancel"] is True
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING
    do_finish_run(a, run.pk, 1, {"exit_code": -15})
    run.refresh_from_db()
    # Restarted as attempt 2 (training restarts), the first failure given as the reason.
    assert run.status == Run.Status.QUEUED
    assert run.attempt == 2
    attempt = run.attempts.get(number=1)
    assert attempt.exit_reason == "host cpu-2 (ranks 2-3) failed first: segfault"
    assert run.failed_hosts == {"cpu-2": 1}
    states = dict(run.placements.filter(attempt=1).values_list("host_name", "state"))
    assert states == {"cpu-1": Placement.State.STOPPED, "cpu-2": Placement.State.FAILED}
    assert not DeviceLease.objects.filter(run=run).exists()


def test_a_host_whose_worker_restarted_loses_its_share_and_the_gang_stops(owner, settings) -> None:
    settings.NPULAB = {**settings.NPULAB, "RUN_CLAIM_GRACE_S": 0}
    run, a, b = _started(owner)
    assert do_reconcile_host_runs(b, [], timezone.now() + timezone.timedelta(seconds=1)) == 1
    assert do_ingest_events(a, run.pk, 1, 0, 0, [])["cancel"] is True
    do_finish_run(a, run.pk, 1, {"exit_code": -15})
    run.refresh_from_db()
    attempt = run.attempts.get(number=1)
    assert attempt.exit_cause == "worker_lost"
    assert attempt.exit_reason.startswith("host cpu-2 (ranks 2-3) failed first: the host worker")


def test_a_gang_succeeds_when_every_host_did(owner) -> None:
    run, a, b = _started(owner)
    done = {"type": "result", "time": 1.0, "status": "succeeded", "reason": "training finished"}
    do_ingest_events(b, run.pk, 1, 0, 10, [done])
    do_finish_run(b, run.pk, 1, {"exit_code": 0})
    do_ingest_events(a, run.pk, 1, 0, 10, [done])
    do_finish_run(a, run.pk, 1, {"exit_code": 0})
    run.refresh_from_db()
    assert (run.status, run.exit_reason) == (Run.Status.SUCCEEDED, "training finished")
    assert set(run.placements.values_list("state", flat=True)) == {Placement.State.SUCCEEDED}


def test_the_run_api_lists_placements_and_the_shape(owner) -> None:
    run, _a, _b = _started(owner)
    body = token_client(owner).get(f"/api/v1/runs/{run.pk}/").json()
    assert body["shape"] == "2 × 2 cpu"
    assert body["hosts"] == 2
    assert [
        {key: p[key] for key in ("host", "ranks", "devices", "state", "exit_code")}
        for p in body["placements"]
    ] == [
        {
            "host": "cpu-1",
            "ranks": [0, 1],
            "devices": [0, 1],
            "state": "running",
            "exit_code": None,
        },
        {
            "host": "cpu-2",
            "ranks": [2, 3],
            "devices": [0, 1],
            "state": "running",
            "exit_code": None,
        },
    ]


def test_the_run_page_lists_each_host_and_the_list_shows_the_shape(owner, client) -> None:
    run, _, _ = _started(owner)
    client.force_login(owner)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="placements"' in page
    assert 'data-node="1"' in page
    assert "2\u20133" in page  # ranks 2 to 3
    assert "2 × 2 cpu" in client.get("/runs/").content.decode()


def test_the_sweeper_loses_only_the_silent_host_of_a_gang(owner, settings) -> None:
    run, a, _b = _started(owner)
    later = timezone.now() + timezone.timedelta(
        seconds=settings.NPULAB["RUN_HEARTBEAT_TIMEOUT_S"] + 1
    )
    # Node rank 0 keeps the run alive; node rank 1 said nothing since its claim.
    Run.objects.filter(pk=run.pk).update(last_heartbeat=later)
    Placement.objects.filter(run=run, node_rank=0).update(last_heartbeat=later)
    assert sweep_runs(later)["lost"] == 1
    states = dict(run.placements.values_list("host_name", "state"))
    assert states == {"cpu-1": Placement.State.RUNNING, "cpu-2": Placement.State.LOST}
    assert do_ingest_events(a, run.pk, 1, 0, 0, [])["cancel"] is True


def test_a_gang_host_that_goes_offline_before_its_claim_loses_its_share_at_once(
    owner, settings
) -> None:
    a, b = host("cpu-1"), host("cpu-2")
    run = gang(owner)
    place_queued_runs()
    do_claim_run(a, run.pk, 1)
    later = timezone.now() + timezone.timedelta(
        seconds=settings.NPULAB["HOST_HEARTBEAT_TIMEOUT_S"] + 1
    )
    # cpu-1 ran on and beat; cpu-2's worker died before it claimed its share.
    Host.objects.filter(pk=a.pk).update(last_heartbeat=later)
    Run.objects.filter(pk=run.pk).update(last_heartbeat=later)
    assert sweep_hosts(later) == 1
    placement = run.placements.get(host=b)
    # Well within the dispatch timeout, after which a share is lost anyway.
    waited = timezone.timedelta(seconds=settings.NPULAB["DISPATCH_TIMEOUT_S"])
    assert later < placement.leased_at + waited
    assert sweep_runs(later)["lost"] == 1
    placement.refresh_from_db()
    assert placement.state == Placement.State.LOST
    assert placement.exit_reason == "host cpu-2 went offline before it claimed its share"
    assert do_ingest_events(a, run.pk, 1, 0, 0, [])["cancel"] is True


def test_a_heartbeat_tells_the_other_hosts_of_a_failed_gang_to_stop(owner) -> None:
    run, _, b = _started(owner)
    client = agent_client(b)
    beat = client.post("/api/v1/agent/heartbeat/", {"running": [run.pk]}, format="json")
    assert beat.json()["cancel"] == []
    do_cancel_run(run.pk, owner)
    beat = client.post("/api/v1/agent/heartbeat/", {"running": [run.pk]}, format="json")
    assert beat.json()["cancel"] == [run.pk]


def test_a_new_attempt_on_the_same_host_gets_another_rendezvous_port(owner) -> None:
    run, a, b = _started(owner)
    first = run.placements.get(attempt=1, node_rank=0).master_port
    do_finish_run(b, run.pk, 1, {"exit_code": 1})
    do_finish_run(a, run.pk, 1, {"exit_code": -15})
    place_queued_runs()
    again = Placement.objects.get(run=run, attempt=2, node_rank=0)
    assert again.host_name == "cpu-1"
    assert again.master_port != first


def test_the_run_pages_telemetry_shows_every_hosts_devices(owner, client) -> None:
    run, _, _ = _started(owner)
    client.force_login(owner)
    panel = client.get(f"/runs/{run.pk}/").content.decode().split('id="run-telemetry"')[1]
    urls = re.findall(r'data-url="(/hosts/[^"]+)"', panel)
    assert [url.split("/")[2] for url in urls] == ["cpu-1", "cpu-2"]
    assert all(url.endswith("devices=0,1") for url in urls)
    assert "node 1 (ranks 2\u20133) on" in panel
    # Each host's charts keep their own place across the live part's refreshes.
    assert 'id="run-telemetry-1-0"' in panel
    assert 'id="run-telemetry-1-1"' in panel


@pytest.mark.parametrize(
    ("metric_ranks", "error"),
    [
        ([0, 4], "rank 4 is beyond the run's 4 rank(s) (hosts × devices)"),
        ("some", 'must be "all" or a list of global ranks such as [0, 8]'),
        ([1, True], "True is no global rank (0 to 4095)"),
        ([], 'must be "all" or a list of global ranks such as [0, 8]'),
    ],
)
def test_metric_ranks_that_the_run_cannot_have_are_a_400_naming_the_field(
    owner, metric_ranks: Any, error: str
) -> None:
    host("cpu-1"), host("cpu-2")
    body = {
        "kind": "training",
        "device_type": "cpu",
        "entry": "builtin:cnn",
        "hosts": 2,
        "devices": 2,
        "metric_ranks": metric_ranks,
    }
    response = token_client(owner).post("/api/v1/runs/", body, format="json")
    assert response.status_code == 400
    assert response.json()["metric_ranks"] == [error]


def test_metric_ranks_default_to_rank_0_and_always_hold_it(owner) -> None:
    host("cpu-1"), host("cpu-2")
    assert gang(owner).spec["metric_ranks"] == [0]
    assert gang(owner, metric_ranks=[3, 2]).spec["metric_ranks"] == [0, 2, 3]
    assert gang(owner, metric_ranks="all").spec["metric_ranks"] == "all"


def test_another_hosts_metrics_are_stored_per_rank_when_asked(owner) -> None:
    a, b = host("cpu-1"), host("cpu-2")
    run = gang(owner, metric_ranks=[0, 3])
    place_queued_runs()
    do_claim_run(a, run.pk, 1)
    do_claim_run(b, run.pk, 1)

    def metric(key: str, step: int, value: float) -> dict[str, Any]:
        return {"type": "metric", "time": 1.0, "key": key, "step": step, "value": value}

    # Node rank 0 holds ranks 0-1: its own loss, and rank 1's, which was not asked for
    # (workers.track writes none; the platform keeps what rank 1 would be stored as anyway).
    do_ingest_events(a, run.pk, 1, 0, 10, [metric("loss", 0, 2.0)])
    # Node rank 1 holds ranks 2-3: only rank 3's is kept; a plain key (its stdout's, say)
    # or a rank it does not hold never becomes another rank's or the run's own series.
    node_1 = [
        metric("loss@rank3", 0, 2.5),
        metric("loss@rank2", 0, 2.4),
        metric("loss", 0, 9.0),
        metric("loss@rank1", 0, 9.0),
    ]
    do_ingest_events(b, run.pk, 1, 0, 10, node_1)
    assert metric_keys(run) == ["loss", "loss@rank3"]
    assert series(Owner.of_run(run.pk), "loss")["points"] == [(0, 2.0)]
    assert series(Owner.of_run(run.pk), "loss@rank3")["points"] == [(0, 2.5)]


def test_a_runs_charts_show_its_own_series_first_then_each_ranks() -> None:
    keys = [("lr@rank2", "track"), ("loss@rank2", "track"), ("lr", "track"), ("loss", "stdout")]
    ordered = sorted(keys, key=lambda row: chart_order(*row))
    assert [key for key, _ in ordered] == ["loss", "lr", "loss@rank2", "lr@rank2"]


def test_another_hosts_packed_metrics_keep_only_its_asked_ranks(owner, tmp_path) -> None:
    a, b = host("cpu-1"), host("cpu-2")
    run = gang(owner, metric_ranks="all")
    place_queued_runs()
    do_claim_run(a, run.pk, 1)
    do_claim_run(b, run.pk, 1)
    path = tmp_path / "events.jsonl"
    writer = EventWriter(str(path))
    for step in range(50):
        writer.metrics(step, {"loss@rank2": 1.0, "loss": 9.0})
    writer.log("stdout", "step 49")
    writer.close()
    body, _ = pack(path.read_bytes())
    client = agent_client(b)
    end = path.stat().st_size
    response = client.post(
        f"/api/v1/agent/runs/{run.pk}/events/?attempt=1&start=0&end={end}",
        body,
        content_type=BLOCKS,
    )
    assert response.status_code == 200, response.content
    assert metric_keys(run) == ["loss@rank2"]
    assert series(Owner.of_run(run.pk), "loss@rank2")["total"] == 50
    assert run.events.get(type="log").data == {"stream": "stdout", "line": "step 49", "node": 1}


def test_the_log_page_narrows_to_one_rank(owner, client) -> None:
    run, a, b = _started(owner)

    def line(text: str, rank: int | None = None) -> dict[str, Any]:
        event = {"type": "log", "time": 1.0, "stream": "stdout", "line": text}
        return event if rank is None else dict(event, line=f"[rank{rank}]: {text}", rank=rank)

    do_ingest_events(a, run.pk, 1, 0, 10, [line("launcher says hi"), line("loss 1.0", 1)])
    do_ingest_events(b, run.pk, 1, 0, 10, [line("loss 2.0", 3), line("loss 3.0", 2)])
    client.force_login(owner)
    page = client.get(f"/runs/{run.pk}/log/", {"rank": 3}).content.decode()
    assert "[rank3]: loss 2.0" in page
    assert "loss 1.0" not in page
    assert "launcher says hi" not in page
    assert "from rank 3" in page
    assert '<option value="3" selected>rank 3</option>' in page
    refused = client.get(f"/runs/{run.pk}/log/", {"rank": 4})
    assert refused.status_code == 400
    assert "rank: a rank from 0 to 3" in refused.content.decode()
