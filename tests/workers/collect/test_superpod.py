"""A3 super pod ids from ``npu-smi info -t spod-info`` (tests/fixtures/spod_info/README.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.paths import TESTS_DIR
from tests.workers.fake_tool import FakeTool
from tests.workers.telemetry.conftest import dcmi_error
from workers.collect import superpod

OUTPUT = TESTS_DIR / "fixtures" / "spod_info"
A3 = OUTPUT / "spod-info_A3_i0-c0.txt"
NOT_SUPPORTED = OUTPUT / "spod-info_not-supported.txt"


@pytest.fixture
def npu_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeTool:
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return FakeTool(tmp_path, "npu-smi")


def test_an_a3_chip_has_its_sdid_and_super_pod() -> None:
    assert superpod.parse_spod_info(A3.read_text()) == {
        "SDID": 16777216,
        "Super Pod Size": 384,
        "Super Pod ID": 0,
        "Server Index": 4,
    }


def test_other_hardware_has_no_super_pod() -> None:
    assert superpod.parse_spod_info(NOT_SUPPORTED.read_text()) is None


def test_text_that_is_no_spod_info_is_refused() -> None:
    with pytest.raises(superpod.SuperPodError, match="no SDID and Super Pod ID"):
        superpod.parse_spod_info("Super Pod Size : 384\n")


def test_every_chip_is_asked_by_its_npu_and_chip_id(npu_smi: FakeTool) -> None:
    npu_smi.answer('"info -t spod-info -i "*', A3)
    found, errors = superpod.super_pods([(0, 0, 0), (1, 0, 1), (2, 1, 0)])
    assert found == {0: (16777216, 0), 1: (16777216, 0), 2: (16777216, 0)}
    assert errors == []
    assert npu_smi.calls() == [
        "info -t spod-info -i 0 -c 0",
        "info -t spod-info -i 0 -c 1",
        "info -t spod-info -i 1 -c 0",
    ]


def test_a_host_without_super_pods_is_asked_once(npu_smi: FakeTool) -> None:
    npu_smi.answer('"info -t spod-info -i "*', NOT_SUPPORTED)
    assert superpod.super_pods([(0, 0, 0), (1, 1, 0), (2, 2, 0)]) == ({}, [])
    assert len(npu_smi.calls()) == 1


def test_a_chip_npu_smi_failed_on_is_left_out_and_said(npu_smi: FakeTool) -> None:
    npu_smi.answer('"info -t spod-info -i 0 -c 1"', dcmi_error("-8005"), code=255)
    npu_smi.answer('"info -t spod-info -i "*', A3)
    found, errors = superpod.super_pods([(0, 0, 0), (1, 0, 1)])
    assert found == {0: (16777216, 0)}
    assert errors == [
        "npu-smi info -t spod-info -i 0 -c 1 exited with 255: "
        "dcmi module initialize failed. ret is -8005"
    ]
