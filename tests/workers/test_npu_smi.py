from __future__ import annotations

import pytest

from tests.paths import ASCEND_FIXTURES
from workers.collect.npu_smi import NpuSmiParseError, parse_chip_mapping

OTHER = ASCEND_FIXTURES / "npu-smi-other"


def fixture(name: str) -> str:
    return (OTHER / name).read_text()


def test_mapping_skips_mcu_rows_and_keeps_logic_ids() -> None:
    rows = parse_chip_mapping(fixture("npu-smi-info-m_910B4_8card_with-Mcu-rows_blog.txt"))
    assert len(rows) == 16
    usable = [row for row in rows if row["logic_id"] is not None]
    assert [row["logic_id"] for row in usable] == list(range(8))
    assert {row["name"] for row in usable} == {"Ascend 910B4"}
    assert rows[1] == {"npu": 0, "chip": 1, "logic_id": None, "name": "Mcu"}


@pytest.mark.parametrize(
    "name",
    sorted(p.name for p in OTHER.glob("npu-smi-info-m_*")),
)
def test_every_mapping_fixture_parses(name: str) -> None:
    rows = parse_chip_mapping(fixture(name))
    assert rows
    assert all(isinstance(row["npu"], int) for row in rows)


def test_text_that_is_no_mapping_is_refused() -> None:
    with pytest.raises(NpuSmiParseError, match="not `npu-smi info -m` output"):
        parse_chip_mapping(fixture("npu-smi-info-l_910B4_8card_blog.txt"))
