from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.paths import ASCEND_FIXTURES
from workers.host.devices import DeviceDetectionError, detect

OTHER = ASCEND_FIXTURES / "npu-smi-other"


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
    fake_tool(bin_dir, "npu-smi", OTHER / "npu-smi-info-m_910B4_8card_with-Mcu-rows_blog.txt")
    device_type, devices = detect(None, None)
    assert device_type == "npu"
    assert [device["index"] for device in devices] == list(range(8))
    assert devices[3] == {"index": 3, "name": "Ascend 910B4", "npu": 3, "chip": 0}


def test_a_failing_npu_smi_says_what_to_set(bin_dir: Path) -> None:
    fake_tool(bin_dir, "npu-smi", None, code=1)
    with pytest.raises(DeviceDetectionError, match=r"exited with 1: dcmi .* set the device count"):
        detect("npu", None)


def test_a_configured_count_needs_no_tool(bin_dir: Path) -> None:
    device_type, devices = detect("npu", 2)
    assert device_type == "npu"
    assert devices == [{"index": 0, "name": ""}, {"index": 1, "name": ""}]
