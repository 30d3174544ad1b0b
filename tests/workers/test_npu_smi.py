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
    assert rows[1] == {"npu": 0, "chip": 1, "logic_id": None, "phy_id": None, "name": "Mcu"}


def a3_mapping(chips: list[tuple[int, int, int, int]]) -> str:
    """``npu-smi info -m`` of an Atlas A3 host, laid out as npu-smi's
    ``print_mapping_info_910_93`` prints it (no capture of it is at hand):
    https://github.com/verylucky01/driver/blob/e29d066fd6ee84cae705e2000a0387d721d3aaa0/src/custom/dev_prod/user/npucli/src/npu_info_print.c
    """

    def row(*cells: object, last: str) -> str:
        return "\t" + " ".join(f"{cell!s:<30}" for cell in cells) + f" {last}\n"

    text = row("NPU ID", "Chip ID", "Chip Logic ID", "Chip Phy-ID", last=f"{'Chip Name':<30}")
    for npu, chip, logic, phy in chips:
        text += row(npu, chip, logic, phy, last="Ascend910")
        if chip == 1:
            text += row(npu, 2, "-", "-", last=f"{'Mcu':<30}")
    return text


def test_an_a3_mapping_keeps_the_physical_id_out_of_the_name() -> None:
    rows = parse_chip_mapping(a3_mapping([(0, 0, 0, 0), (0, 1, 1, 1), (1, 0, 2, 2), (1, 1, 3, 3)]))
    assert [(r["npu"], r["chip"], r["logic_id"], r["phy_id"], r["name"]) for r in rows] == [
        (0, 0, 0, 0, "Ascend910"),
        (0, 1, 1, 1, "Ascend910"),
        (0, 2, None, None, "Mcu"),
        (1, 0, 2, 2, "Ascend910"),
        (1, 1, 3, 3, "Ascend910"),
        (1, 2, None, None, "Mcu"),
    ]


def test_an_a2_mapping_prints_no_physical_id() -> None:
    rows = parse_chip_mapping(fixture("npu-smi-info-m_910B4_8card_with-Mcu-rows_blog.txt"))
    assert {row["phy_id"] for row in rows} == {None}


def test_the_ascend_950_layout_reads_its_npu_id_as_the_logical_id() -> None:
    rows = parse_chip_mapping(fixture("npu-smi-info-m_Ascend950_Atlas350_OFFICIAL-DOC.txt"))
    assert rows == [{"npu": 0, "chip": 0, "logic_id": 0, "phy_id": 0, "name": "xxx"}]


def mapping_950(chips: list[tuple[int, int, int, str]]) -> str:
    """``npu-smi info -m`` of an Ascend 950 host, as ``print_mapping_info_950`` prints it
    (NPU ID, Slot ID, Chip ID 0, Chip Phy-ID, name), for ids the one documented example
    does not show (npulab's fixture of it: npu-smi-info-m_Ascend950_Atlas350_OFFICIAL-DOC)."""
    text = "\t" + " ".join(
        f"{name:<30}" for name in ("NPU ID", "Slot ID", "Chip ID", "Chip Phy-ID", "Chip Name")
    )
    for npu, slot, phy, name in chips:
        text += "\n\t" + " ".join(f"{cell!s:<30}" for cell in (npu, slot, 0, phy)) + f" {name}"
    return text + "\n"


def test_an_ascend_950_in_a_container_maps_logical_to_physical_ids() -> None:
    rows = parse_chip_mapping(mapping_950([(0, 4, 4, "Ascend950"), (1, 5, 5, "Ascend950")]))
    assert [(r["logic_id"], r["phy_id"], r["name"]) for r in rows] == [
        (0, 4, "Ascend950"),
        (1, 5, "Ascend950"),
    ]


def test_an_unavailable_ascend_950_npu_is_left_out() -> None:
    # npu-smi prints NPU ID -1 for an NPU that is unavailable: its row means nothing.
    rows = parse_chip_mapping(mapping_950([(-1, -1, 3, "Ascend950"), (0, 1, 1, "Ascend950")]))
    assert [(r["logic_id"], r["phy_id"]) for r in rows] == [(0, 1)]


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
