"""Telemetry samples made from the real npu-smi captures, as a host worker makes them.

The capture is parsed by the collector's parser (``workers.collect.npu_smi``)
and turned into contract samples by the host worker's own sampler code
(``workers.telemetry.npu``), then validated as the platform does. ECC counts
come from the official ``npu-smi info -t ecc`` example, with its numbers set.
"""

from __future__ import annotations

import re
from typing import Any

from tests.paths import ASCEND_FIXTURES
from workers.collect.npu_smi import parse_info
from workers.contract import telemetry
from workers.telemetry.npu import ecc_readings, parse_key_values, table_samples

WARNING_8CARD = (
    "npu-smi-info/24_OFFICIAL-DOC_Atlas800-9010_8card_npu-smi-24.1.RC2_HEALTH-WARNING_hlt-procs.txt"
)
ALARM_310B4 = "npu-smi-info/20_310B4_npu-smi-23.0.0_Health-ALARM_no-HBM.txt"
IDLE_8CARD = "npu-smi-info/03_910B2_8card_npu-smi-23.0.3_all-idle.txt"
OTHER = "npu-smi-other/OFFICIAL-DOC_Atlas200IA2_board_usages_health_product_v_h.txt"


def samples(capture: str, when: float, **readings: float) -> list[dict[str, Any]]:
    """One validated sample per chip of ``capture`` at ``when``; ``readings`` override or add."""
    info = parse_info((ASCEND_FIXTURES / capture).read_text())
    out = []
    for sample in table_samples(info, when, {}, has_processes=bool(info["processes"])).values():
        sample.pop("_chip")
        sample["readings"].update(readings)
        out.append(telemetry.validate_sample(sample))
    return sorted(out, key=lambda sample: sample["index"])


def device(capture: str, index: int, when: float, **readings: float) -> list[dict[str, Any]]:
    """The sample of one chip of ``capture``."""
    return [s for s in samples(capture, when, **readings) if s["index"] == index]


def ecc(single: int, double: int) -> dict[str, float]:
    """The readings of the official ``npu-smi info -t ecc`` example with these counts."""
    text = (ASCEND_FIXTURES / OTHER).read_text()
    section = text.split("npu-smi info -t ecc -i 0 -c 0\n", 1)[1].split("\n\n", 1)[0]
    section = re.sub(r"(Single-bit Error Count\s*:\s*)\d+", rf"\g<1>{single}", section)
    section = re.sub(r"(Double-bit Error Count\s*:\s*)\d+", rf"\g<1>{double}", section)
    return ecc_readings(parse_key_values(section))
