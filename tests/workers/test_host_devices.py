from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.paths import ASCEND_FIXTURES, TESTS_DIR
from tests.workers.fake_tool import FakeTool
from tests.workers.test_npu_smi import a3_mapping
from workers.host.devices import DeviceDetectionError, detect

OTHER = ASCEND_FIXTURES / "npu-smi-other"
HCCN = TESTS_DIR / "fixtures" / "hccn_tool"
SPOD = TESTS_DIR / "fixtures" / "spod_info"


def fake_tool(directory: Path, name: str, output_file: Path | None, code: int = 0) -> None:
    """An executable on PATH that prints a captured output, as the real tool did."""
    script = directory / name
    body = (
        f"cat '{output_file}'\n"
        if output_file
        else "echo 'dcmi model initialized failed, because the device is used. ret is -8020' >&2\n"
    )
    script.write_text(f"#!/bin/sh\n{body}exit {code}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return tmp_path


def test_cpu_host_offers_one_device() -> None:
    device_type, devices = detect("cpu", None)
    assert device_type == "cpu"
    assert len(devices) == 1
    assert devices[0]["index"] == 0


def test_an_npu_host_is_found_through_npu_smi(bin_dir: Path) -> None:
    npu_smi = FakeTool(bin_dir, "npu-smi")
    npu_smi.answer('"info -m"', OTHER / "npu-smi-info-m_910B4_8card_with-Mcu-rows_blog.txt")
    npu_smi.answer('"info -t spod-info "*', SPOD / "spod-info_not-supported.txt")
    device_type, devices = detect(None, None)
    assert device_type == "npu"
    assert [device["index"] for device in devices] == list(range(8))
    assert devices[3] == {"index": 3, "name": "Ascend 910B4", "npu": 3, "chip": 0}
    # An A2 host has no super pod: asked once, it registers no SDIDs.
    assert npu_smi.calls() == ["info -m", "info -t spod-info -i 0 -c 0"]


def test_an_a3_host_registers_each_devices_ip_sdid_and_super_pod(bin_dir: Path) -> None:
    npu_smi = FakeTool(bin_dir, "npu-smi")
    npu_smi.answer('"info -m"', a3_mapping([(0, 0, 0, 0), (0, 1, 1, 1)]))
    npu_smi.answer('"info -t spod-info -i 0 -c "*', SPOD / "spod-info_A3_i0-c0.txt")
    hccn_tool = FakeTool(bin_dir, "hccn_tool")
    hccn_tool.answer('"-i 0 -ip -g"', HCCN / "ip-g_device-0.txt")
    hccn_tool.answer('"-i 1 -ip -g"', code=13, stderr=HCCN / "ip-g_no-ip.stderr.txt")
    device_type, devices = detect("npu", None)
    assert device_type == "npu"
    assert devices == [
        {
            "index": 0,
            "name": "Ascend910",
            "npu": 0,
            "chip": 0,
            "phy_id": 0,
            "ip": "10.10.100.10",
            "sdid": 16777216,
            "super_pod_id": 0,
        },
        {
            "index": 1,
            "name": "Ascend910",
            "npu": 0,
            "chip": 1,
            "phy_id": 1,
            "sdid": 16777216,
            "super_pod_id": 0,
        },
    ]
    assert npu_smi.calls()[1:] == ["info -t spod-info -i 0 -c 0", "info -t spod-info -i 0 -c 1"]


def test_a_failing_npu_smi_says_what_to_set(bin_dir: Path) -> None:
    fake_tool(bin_dir, "npu-smi", None, code=1)
    with pytest.raises(DeviceDetectionError, match=r"exited with 1: dcmi .* set the device count"):
        detect("npu", None)


def test_a_configured_count_needs_no_tool(bin_dir: Path) -> None:
    device_type, devices = detect("npu", 2)
    assert device_type == "npu"
    assert devices == [{"index": 0, "name": ""}, {"index": 1, "name": ""}]


def test_in_a_container_hccn_tool_is_asked_by_each_devices_physical_id(bin_dir: Path) -> None:
    """An A3 host's devices 4-7 mapped into a container, where npu-smi numbers them 0-3."""
    npu_smi = FakeTool(bin_dir, "npu-smi")
    mapping = a3_mapping([(2, 0, 0, 4), (2, 1, 1, 5), (3, 0, 2, 6), (3, 1, 3, 7)])
    npu_smi.answer('"info -m"', mapping)
    npu_smi.answer('"info -t spod-info "*', SPOD / "spod-info_not-supported.txt")
    hccn_tool = FakeTool(bin_dir, "hccn_tool")
    hccn_tool.answer('"-i 4 -ip -g"', HCCN / "ip-g_device-0.txt")
    hccn_tool.answer('"-i 5 -ip -g"', HCCN / "ip-g_device-1.txt")
    hccn_tool.answer("*", code=4, stderr=HCCN / "invalid-device.stderr.txt")
    _, devices = detect("npu", None)
    assert [(d["index"], d["phy_id"], d.get("ip")) for d in devices] == [
        (0, 4, "10.10.100.10"),
        (1, 5, "10.10.100.11"),
        (2, 6, None),
        (3, 7, None),
    ]
    assert hccn_tool.calls() == [f"-i {phy} -ip -g" for phy in (4, 5, 6, 7)]


def test_an_ascend_950_host_registers_its_physical_ids(bin_dir: Path) -> None:
    npu_smi = FakeTool(bin_dir, "npu-smi")
    npu_smi.answer('"info -m"', OTHER / "npu-smi-info-m_Ascend950_Atlas350_OFFICIAL-DOC.txt")
    npu_smi.answer('"info -t spod-info "*', SPOD / "spod-info_not-supported.txt")
    _, devices = detect("npu", None)
    assert devices == [{"index": 0, "name": "xxx", "npu": 0, "chip": 0, "phy_id": 0}]
