"""A gang's pre-flight checks and device inventory with a fake hccn_tool on PATH."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from tests.paths import TESTS_DIR
from tests.workers.fake_tool import FakeTool
from workers.collect import hccn
from workers.contract.gang import launch_env
from workers.host.preflight import preflight

OUTPUT = TESTS_DIR / "fixtures" / "hccn_tool"
# hccn_tool's exit status when a ping lost a packet, and what it says on stderr.
PING_FAILED = {"code": 1, "stderr": OUTPUT / "ping-g_failed.stderr.txt"}


def fake_hccn(directory: Path, link: str = "link-g_up.txt", ping: str = "ping-g_reachable.txt"):
    """hccn_tool answering -ip, -link and -ping with the given real outputs."""
    tool = FakeTool(directory, "hccn_tool")
    tool.answer("*-ip*", OUTPUT / "ip-g_device-0.txt")
    tool.answer("*-link*", OUTPUT / link)
    failed = PING_FAILED if ping != "ping-g_reachable.txt" else {}
    tool.answer("*-ping*", OUTPUT / ping, **failed)
    return tool


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return tmp_path


def npu_gang(node_rank: int = 1, port: int = 29500) -> dict:
    return {
        "hosts": 2,
        "node_rank": node_rank,
        "first_rank": 2 * node_rank,
        "local_world_size": 2,
        "world_size": 4,
        "master_addr": "192.0.2.1",
        "master_port": port,
        "peers": [
            {"node_rank": 0, "host": "npu-1", "device_ips": {"0": "10.10.100.22"}},
            {"node_rank": 1, "host": "npu-2", "device_ips": {"0": "10.10.100.10"}},
        ],
    }


def test_the_device_ips_come_from_hccn_tool(bin_dir: Path) -> None:
    fake_hccn(bin_dir)
    assert hccn.device_ips([0]) == {0: "10.10.100.10"}


def test_a_healthy_npu_host_passes(bin_dir: Path) -> None:
    fake_hccn(bin_dir)
    assert preflight(npu_gang(), [0, 1], "npu") == []


def test_a_link_that_is_down_names_the_device_and_the_check(bin_dir: Path) -> None:
    fake_hccn(bin_dir, link="link-g_down.txt")
    assert preflight(npu_gang(), [0, 1], "npu") == [
        "device link of device 0 is DOWN (hccn_tool -link -g)",
        "device link of device 1 is DOWN (hccn_tool -link -g)",
    ]


def test_an_unreachable_peer_names_its_host_and_device(bin_dir: Path) -> None:
    tool = fake_hccn(bin_dir, ping="ping-g_unreachable.txt")
    assert preflight(npu_gang(), [0, 1], "npu") == [
        "peer npu-1 device 0 (10.10.100.22) is unreachable: 3 packets sent, none received"
    ]
    assert "-i 0 -ping -g address 10.10.100.22" in tool.calls()


def test_a_peer_that_lost_a_packet_is_refused(bin_dir: Path) -> None:
    fake_hccn(bin_dir, ping="ping-g_partial-loss.txt")
    assert preflight(npu_gang(), [0, 1], "npu") == [
        "peer npu-1 device 0 (10.10.100.22) lost 1 of 3 packets"
    ]


def test_a_ping_hccn_tool_refused_names_the_tools_reason(bin_dir: Path) -> None:
    tool = FakeTool(bin_dir, "hccn_tool")
    tool.answer("*-link*", OUTPUT / "link-g_up.txt")
    tool.answer("*-ping*", code=22, stderr=OUTPUT / "link-is-down.stderr.txt")
    assert preflight(npu_gang(), [0], "npu") == [
        "peer npu-1 device 0 (10.10.100.22): hccn_tool -i 0 -ping -g address 10.10.100.22 "
        "exited with 22: Execute failed: Link status is down."
    ]


def test_without_hccn_tool_an_npu_gang_is_refused(bin_dir: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(bin_dir))
    problems = preflight(npu_gang(), [0], "npu")
    assert problems[0].startswith("device link of device 0: hccn_tool is not on PATH")


def test_rank_0_refuses_a_master_port_in_use() -> None:
    with socket.socket() as taken:
        taken.bind(("", 0))
        taken.listen()
        port = taken.getsockname()[1]
        problems = preflight(npu_gang(node_rank=0, port=port), [], "cpu")
    assert problems == [f"master port {port}: cannot listen there (Address already in use)"]


def test_the_launch_env_carries_the_rendezvous_and_hccl_settings() -> None:
    gang = dict(npu_gang(), hccl={"if_ip": "192.0.2.2", "connect_timeout": 900})
    env = launch_env(gang)
    assert env["MASTER_ADDR"] == "192.0.2.1"
    assert (env["WORLD_SIZE"], env["RANK"], env["NODE_RANK"]) == ("4", "2", "1")
    assert (env["LOCAL_WORLD_SIZE"], env["NPULAB_NNODES"]) == ("2", "2")
    assert (env["HCCL_IF_IP"], env["HCCL_CONNECT_TIMEOUT"]) == ("192.0.2.2", "900")
    assert "HCCL_SOCKET_IFNAME" not in env


def test_different_versions_on_two_hosts_refuse_the_gang(bin_dir: Path) -> None:
    fake_hccn(bin_dir)
    gang = npu_gang()
    gang["peers"][0]["versions"] = {"cann": "8.0.RC3", "driver": "24.1.rc3"}
    gang["peers"][1]["versions"] = {"cann": "8.1.RC1", "driver": "24.1.rc3"}
    assert preflight(gang, [0], "npu") == [
        "versions differ across hosts: cann 8.0.RC3 on npu-1, 8.1.RC1 on npu-2"
    ]


def a3_gang(*sdids: dict, pods: tuple[int, ...] = ()) -> dict:
    """An NPU gang whose hosts report these SDIDs for their leased devices 0 and 1, in
    super pod 0 unless ``pods`` names each host's."""
    gang = npu_gang()
    gang["peers"] = [
        {
            "node_rank": node,
            "host": f"npu-{node + 1}",
            "devices": [0, 1],
            "device_ips": {"0": f"10.10.10{node}.10"},
            "super_device_ids": ids,
            "super_pod_ids": dict.fromkeys(ids, pods[node] if pods else 0),
        }
        for node, ids in enumerate(sdids)
    ]
    return gang


# SDIDs of servers 9 and 10 of a super pod, chip 0's two dies (tests/fixtures/spod_info/).
SERVER_9 = {"0": 37748736, "1": 37814273}
SERVER_10 = {"0": 41943040, "1": 42008577}


def fake_hccs(directory: Path, answer: str = "hccs-ping-g_reachable.txt", code: int = 0):
    """hccn_tool on an A3 super pod board: its RoCE links down, its HCCS ping answering."""
    tool = fake_hccn(directory, link="link-g_down.txt", ping="ping-g_unreachable.txt")
    tool.answer("*-hccs_ping*", OUTPUT / answer, code=code)
    return tool


def test_a_gang_inside_one_super_pod_is_checked_over_hccs_not_roce(bin_dir: Path) -> None:
    tool = fake_hccs(bin_dir)
    assert preflight(a3_gang(SERVER_9, SERVER_10), [0, 1], "npu") == []
    # Node rank 1 pings node rank 0's devices by SDID; the RoCE ports, down, go unasked.
    assert tool.calls() == [
        "-i 0 -hccs_ping -g sdid 37748736",
        "-i 0 -hccs_ping -g sdid 37814273",
    ]


def test_a_super_pod_peer_that_lost_a_packet_over_hccs_is_refused(bin_dir: Path) -> None:
    fake_hccs(bin_dir, "hccs-ping-g_partial-loss.txt")
    assert preflight(a3_gang(SERVER_9, SERVER_10), [0], "npu") == [
        "peer npu-1 device 0 (SDID 37748736) lost 1 of 3 packets over HCCS",
        "peer npu-1 device 1 (SDID 37814273) lost 1 of 3 packets over HCCS",
    ]


def test_a_board_without_the_hccs_ping_skips_it_and_says_so(bin_dir: Path, caplog) -> None:
    tool = fake_hccs(bin_dir, "hccs-ping-g_not-supported.txt", code=13)
    caplog.set_level("INFO", logger="workers.host.preflight")
    assert preflight(a3_gang(SERVER_9, SERVER_10), [0, 1], "npu") == []
    assert tool.calls() == ["-i 0 -hccs_ping -g sdid 37748736"]
    assert "HCCS links inside super pod 0 go unchecked" in caplog.text


def test_a_gang_across_super_pods_checks_the_roce_links(bin_dir: Path) -> None:
    tool = fake_hccs(bin_dir)
    problems = preflight(a3_gang(SERVER_9, SERVER_10, pods=(0, 1)), [0, 1], "npu")
    assert problems == [
        "device link of device 0 is DOWN (hccn_tool -link -g)",
        "device link of device 1 is DOWN (hccn_tool -link -g)",
        "peer npu-1 device 0 (10.10.100.10) is unreachable: 3 packets sent, none received",
    ]
    assert not [call for call in tool.calls() if "-hccs_ping" in call]


def test_one_sdid_on_two_devices_of_a_super_pod_is_refused_naming_them(bin_dir: Path) -> None:
    fake_hccs(bin_dir)
    # Two servers reporting server 9's SDIDs (a copied spod-info, a misconfigured board).
    problems = preflight(a3_gang(SERVER_9, SERVER_9), [0, 1], "npu")
    assert problems == [
        "SDID 37748736 more than once in super pod 0: npu-1 device 0, npu-2 device 0 "
        "(npu-smi info -t spod-info; HCCL needs one device per super_device_id)",
        "SDID 37814273 more than once in super pod 0: npu-1 device 1, npu-2 device 1 "
        "(npu-smi info -t spod-info; HCCL needs one device per super_device_id)",
    ]


def test_the_same_sdid_in_two_super_pods_is_no_duplicate(bin_dir: Path) -> None:
    fake_hccn(bin_dir)
    assert preflight(a3_gang(SERVER_9, SERVER_9, pods=(0, 1)), [0, 1], "npu") == []


def test_a3_and_other_hosts_in_one_gang_are_refused_by_name(bin_dir: Path) -> None:
    fake_hccn(bin_dir)
    gang = a3_gang(SERVER_9, {}, SERVER_10, {})
    assert preflight(gang, [0, 1], "npu") == [
        "super pod hardware differs across hosts: npu-1, npu-3 have an SDID for every "
        "device (Atlas A3); npu-2, npu-4 have no SDID (no super pod) "
        "(npu-smi info -t spod-info)"
    ]


def test_an_a3_host_missing_an_sdid_is_refused(bin_dir: Path) -> None:
    fake_hccn(bin_dir)
    gang = a3_gang(SERVER_9, {"0": 16777216})
    assert preflight(gang, [0, 1], "npu") == [
        "no SDID for some devices of npu-2 (devices 1), so no rank table of version 1.2 "
        "(npu-smi info -t spod-info)"
    ]


def test_the_super_pod_check_is_an_npu_check() -> None:
    gang = a3_gang(SERVER_9, {})
    assert preflight(dict(gang, node_rank=1), [], "cpu") == []


def test_in_a_container_hccn_tool_is_asked_by_physical_id(bin_dir: Path) -> None:
    """Devices 4 and 5 of the host, mapped into a container as its 0 and 1: the run leases
    0 and 1, hccn_tool knows them as 4 and 5."""
    tool = fake_hccn(bin_dir, link="link-g_down.txt")
    gang = npu_gang()
    gang["peers"][1]["device_phy_ids"] = {"0": 4, "1": 5}
    assert preflight(gang, [0, 1], "npu") == [
        "device link of device 0 (physical id 4) is DOWN (hccn_tool -link -g)",
        "device link of device 1 (physical id 5) is DOWN (hccn_tool -link -g)",
    ]
    assert tool.calls() == [
        "-i 4 -link -g",
        "-i 5 -link -g",
        "-i 4 -ping -g address 10.10.100.22",
    ]


def test_the_hccs_ping_goes_from_the_physical_id_too(bin_dir: Path) -> None:
    tool = fake_hccs(bin_dir)
    gang = a3_gang(SERVER_9, SERVER_10)
    gang["peers"][1]["device_phy_ids"] = {"0": 6, "1": 7}
    assert preflight(gang, [0, 1], "npu") == []
    assert tool.calls()[0] == "-i 6 -hccs_ping -g sdid 37748736"
