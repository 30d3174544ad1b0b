"""Telemetry from the real captures: npu-smi tables parsed by the host side's own sampler."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from npulab.hosts.models import Host
from tests.conftest import register
from tests.factories import HostFactory
from tests.paths import ASCEND_FIXTURES
from workers.collect.npu_smi import parse_info
from workers.telemetry.npu import table_samples

INFO = ASCEND_FIXTURES / "npu-smi-info"
# Eight 910B3 chips, some running processes (health OK).
BUSY_8 = INFO / "01_910B3_8card_npu-smi-25.2.0_procs_and_no-running.txt"
# Atlas 800-9010: health WARNING on a chip.
WARNING_8 = (
    INFO / "24_OFFICIAL-DOC_Atlas800-9010_8card_npu-smi-24.1.RC2_HEALTH-WARNING_hlt-procs.txt"
)
NOW = 1_764_600_000.0  # a fixed "now" (2025-12-01 14:40 UTC) for every clock in these tests


def capture_samples(path=BUSY_8) -> Callable[[float], list[dict[str, Any]]]:
    """A function of time giving the capture's chips as contract samples at that time."""
    table = table_samples(parse_info(path.read_text(encoding="utf-8")), 0.0, {}, True)
    chips = []
    for index in sorted(table):
        sample = dict(table[index])
        sample.pop("_chip", None)
        chips.append(sample)

    def at(when: float) -> list[dict[str, Any]]:
        samples = copy.deepcopy(chips)
        for sample in samples:
            sample["time"] = when
        return samples

    return at


@pytest.fixture
def samples_at() -> Callable[[float], list[dict[str, Any]]]:
    return capture_samples()


@pytest.fixture
def npu_host(db: None) -> Host:
    """An online NPU host with the capture's eight 910B3 chips."""
    host = HostFactory(name="npu-01")
    register(host, "npu", 8)
    host.devices = [{"index": i, "name": "Ascend 910B3"} for i in range(8)]
    host.save(update_fields=["devices"])
    return host
