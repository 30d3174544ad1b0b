"""hccn_tool's real output shapes (tests/fixtures/hccn_tool/README.md), through a fake on PATH."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.paths import TESTS_DIR
from tests.workers.fake_tool import FakeTool
from workers.collect import hccn

OUTPUT = TESTS_DIR / "fixtures" / "hccn_tool"


@pytest.fixture
def hccn_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeTool:
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return FakeTool(tmp_path, "hccn_tool")


def test_the_ip_is_the_ipaddr_line() -> None:
    assert hccn.parse_ip((OUTPUT / "ip-g_device-0.txt").read_text()) == "10.10.100.10"


def test_each_device_answers_with_its_own_ip(hccn_tool: FakeTool) -> None:
    hccn_tool.answer('"-i 0 -ip -g"', OUTPUT / "ip-g_device-0.txt")
    hccn_tool.answer('"-i 1 -ip -g"', OUTPUT / "ip-g_device-1.txt")
    assert hccn.device_ips([0, 1]) == {0: "10.10.100.10", 1: "10.10.100.11"}


def test_a_device_without_an_ip_is_left_out(hccn_tool: FakeTool) -> None:
    hccn_tool.answer('"-i 0 -ip -g"', OUTPUT / "ip-g_device-0.txt")
    hccn_tool.answer('"-i 1 -ip -g"', code=13, stderr=OUTPUT / "ip-g_no-ip.stderr.txt")
    assert hccn.device_ips([0, 1]) == {0: "10.10.100.10"}
    with pytest.raises(hccn.HccnError) as failed:
        hccn.run(["-i", "1", "-ip", "-g"])
    assert str(failed.value) == (
        "hccn_tool -i 1 -ip -g exited with 13: Get ipconf failed, because no ip was preset there!"
    )


@pytest.mark.parametrize("state", ["UP", "DOWN"])
def test_the_link_state(hccn_tool: FakeTool, state: str) -> None:
    hccn_tool.answer('"-i 0 -link -g"', OUTPUT / f"link-g_{state.lower()}.txt")
    assert hccn.link(0) == state


def test_every_packet_back(hccn_tool: FakeTool) -> None:
    hccn_tool.answer('"-i 0 -ping -g address 10.10.100.10"', OUTPUT / "ping-g_reachable.txt")
    assert hccn.ping(0, "10.10.100.10") == (3, 3)


@pytest.mark.parametrize(
    ("output", "counts"),
    [("ping-g_partial-loss.txt", (3, 2)), ("ping-g_unreachable.txt", (3, 0))],
)
def test_a_lost_packet_fails_the_command_yet_the_packets_are_the_answer(
    hccn_tool: FakeTool, output: str, counts: tuple
) -> None:
    hccn_tool.answer(
        '"-i 0 -ping -g address 10.10.100.10"',
        OUTPUT / output,
        code=1,
        stderr=OUTPUT / "ping-g_failed.stderr.txt",
    )
    assert hccn.ping(0, "10.10.100.10") == counts


def test_without_the_summary_line_the_packets_are_counted() -> None:
    lines = (OUTPUT / "ping-g_partial-loss.txt").read_text().splitlines()
    assert hccn.parse_ping("\n".join(lines[:-1])) == (3, 2)
    unreachable = (OUTPUT / "ping-g_unreachable.txt").read_text().splitlines()
    assert hccn.parse_ping("\n".join(unreachable[:-1])) == (3, 0)


def test_a_ping_the_tool_refused_says_why(hccn_tool: FakeTool) -> None:
    hccn_tool.answer("*-ping*", code=22, stderr=OUTPUT / "link-is-down.stderr.txt")
    with pytest.raises(hccn.HccnError) as failed:
        hccn.ping(0, "10.10.100.10")
    assert str(failed.value) == (
        "hccn_tool -i 0 -ping -g address 10.10.100.10 exited with 22: "
        "Execute failed: Link status is down."
    )


def test_an_unknown_device_is_the_tools_own_error(hccn_tool: FakeTool) -> None:
    hccn_tool.answer("*-link*", code=4, stderr=OUTPUT / "invalid-device.stderr.txt")
    with pytest.raises(hccn.HccnError, match=r"exited with 4: Get invalid device id\.$"):
        hccn.link(99)


def test_a_busy_tool_says_so_on_stdout(hccn_tool: FakeTool) -> None:
    hccn_tool.answer("*-link*", OUTPUT / "busy.txt", code=11, stderr="")
    with pytest.raises(hccn.HccnError, match="exited with 11: hccn_tool is busy, please try again"):
        hccn.link(0)
    hccn_tool.answer("*-ping*", OUTPUT / "busy.txt", code=11, stderr="")
    with pytest.raises(hccn.HccnError, match="exited with 11: hccn_tool is busy"):
        hccn.ping(0, "10.10.100.10")


def test_output_that_is_no_ping_is_refused() -> None:
    with pytest.raises(hccn.HccnError, match="no ping summary"):
        hccn.parse_ping((OUTPUT / "link-g_up.txt").read_text())


@pytest.mark.parametrize(
    ("output", "answer"),
    [("hccs-ping-g_reachable.txt", (3, 3)), ("hccs-ping-g_partial-loss.txt", (3, 2))],
)
def test_the_hccs_ping_to_an_sdid(hccn_tool: FakeTool, output: str, answer: tuple) -> None:
    hccn_tool.answer('"-i 4 -hccs_ping -g sdid 41943040"', OUTPUT / output)
    assert hccn.hccs_ping(4, 41943040) == answer


def test_a_board_without_super_pods_runs_no_hccs_ping(hccn_tool: FakeTool) -> None:
    hccn_tool.answer("*-hccs_ping*", OUTPUT / "hccs-ping-g_not-supported.txt", code=13, stderr="")
    assert hccn.hccs_ping(0, 41943040) is None


def test_an_hccs_ping_the_tool_refused_says_why(hccn_tool: FakeTool) -> None:
    hccn_tool.answer("*-hccs_ping*", code=4, stderr=OUTPUT / "invalid-device.stderr.txt")
    with pytest.raises(hccn.HccnError, match=r"-hccs_ping -g sdid 1 exited with 4: Get invalid"):
        hccn.hccs_ping(99, 1)
