"""``npu-smi info`` tables, chip identification and the CLI, on real captured output."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import pytest

from tests.paths import ASCEND_FIXTURES, REPO_DIR
from workers.collect.npu_smi import (
    CHIP_KEYS,
    PROCESS_KEYS,
    NpuSmiParseError,
    identify_chips,
    parse_chip_mapping,
    parse_info,
)

INFO = ASCEND_FIXTURES / "npu-smi-info"
OTHER = ASCEND_FIXTURES / "npu-smi-other"
INFO_FILES = sorted(p.name for p in INFO.glob("*.txt"))


def info(prefix: str) -> dict[str, Any]:
    (path,) = INFO.glob(f"{prefix}_*.txt")
    return parse_info(path.read_text())


def chip(parsed: dict[str, Any], npu: int, chip_id: int = 0) -> dict[str, Any]:
    (found,) = [c for c in parsed["chips"] if c["npu"] == npu and c["chip"] == chip_id]
    return found


@pytest.mark.parametrize("name", INFO_FILES)
def test_every_info_fixture_parses_into_chips_with_the_full_key_set(name: str) -> None:
    parsed = parse_info((INFO / name).read_text())
    assert set(parsed) == {"tool_version", "driver_version", "chips", "processes"}
    assert parsed["chips"]
    assert all(tuple(c) == CHIP_KEYS for c in parsed["chips"])
    assert all(tuple(p) == PROCESS_KEYS for p in parsed["processes"])
    assert all(isinstance(c["npu"], int) and isinstance(c["chip"], int) for c in parsed["chips"])
    # Every fixture's file name carries the npu-smi version.
    assert f"npu-smi-{parsed['tool_version']}" in name


def test_a2_table_reads_versions_chips_and_an_unnamed_process() -> None:
    parsed = info("01")
    assert (parsed["tool_version"], parsed["driver_version"]) == ("25.2.0", "25.2.0")
    assert [c["npu"] for c in parsed["chips"]] == list(range(8))
    assert chip(parsed, 0) == {
        "npu": 0,
        "chip": 0,
        "name": "910B3",
        "health": "OK",
        "power_w": 97.9,
        "temp_c": 34.0,
        "bus_id": "0000:C1:00.0",
        "aicore_pct": 0,
        "memory_used_mb": 0,
        "memory_total_mb": 0,
        "hbm_used_mb": 3408,
        "hbm_total_mb": 65536,
        "hugepages_used": 0,
        "hugepages_total": 0,
        "phy_id": None,
        "device": None,
    }
    # "41052/ 65536" has no blank before the slash.
    assert chip(parsed, 2)["hbm_used_mb"] == 41052
    assert parsed["processes"] == [
        {"npu": 2, "chip": 0, "pid": 1333928, "name": "", "memory_mb": 37709, "container_pid": None}
    ]


def test_several_process_rows_under_one_npu_are_all_kept() -> None:
    processes = info("06")["processes"]
    assert len(processes) == 15
    on_npu0 = [p for p in processes if p["npu"] == 0]
    assert [p["pid"] for p in on_npu0] == [
        3104272,
        3104266,
        3104283,
        3104267,
        3104268,
        3104269,
        3104270,
        3104271,
    ]
    assert on_npu0[1]["memory_mb"] == 33895
    assert {p["name"] for p in processes} == {""}
    assert processes[-1] == {
        "npu": 7,
        "chip": 0,
        "pid": 3104283,
        "name": "",
        "memory_mb": 35696,
        "container_pid": None,
    }


def test_all_idle_table_has_no_processes() -> None:
    parsed = info("03")
    assert parsed["processes"] == []
    assert chip(parsed, 5)["bus_id"] == "0000:41:00.0"
    assert chip(parsed, 0)["hbm_used_mb"] == 4495


def test_a3_table_has_two_chips_per_npu_with_phy_ids_and_no_power_on_chip_1() -> None:
    parsed = info("07")
    assert parsed["tool_version"] == "24.1.rc3.7"
    assert len(parsed["chips"]) == 16
    assert [(c["npu"], c["chip"], c["phy_id"]) for c in parsed["chips"][:4]] == [
        (0, 0, 0),
        (0, 1, 1),
        (1, 0, 2),
        (1, 1, 3),
    ]
    last = chip(parsed, 7, 1)
    assert (last["phy_id"], last["bus_id"], last["power_w"], last["temp_c"]) == (
        15,
        "0000:83:00.0",
        None,
        38.0,
    )
    assert chip(parsed, 7, 0)["power_w"] == 186.1
    assert all(c["device"] is None for c in parsed["chips"])


def test_310p_duo_has_large_npu_ids_devices_and_no_power_or_hbm() -> None:
    parsed = info("10")
    assert [(c["npu"], c["chip"], c["device"]) for c in parsed["chips"]] == [
        (0, 0, 0),
        (0, 1, 1),
        (32, 0, 2),
        (32, 1, 3),
        (32768, 0, 4),
        (32768, 1, 5),
        (32800, 0, 6),
        (32800, 1, 7),
    ]
    duo = chip(parsed, 32768, 1)
    assert duo["name"] == "310P3"
    assert (duo["memory_used_mb"], duo["memory_total_mb"]) == (1391, 43693)
    assert duo["power_w"] is None
    assert (duo["hbm_used_mb"], duo["hbm_total_mb"], duo["phy_id"]) == (None, None, None)
    assert (duo["hugepages_used"], duo["hugepages_total"]) == (0, 0)
    assert parsed["processes"] == []


def test_narrow_910a_layout_reads_hugepages_ddr_and_hbm() -> None:
    parsed = info("12")
    assert parsed["tool_version"] == "21.0.4"
    first = chip(parsed, 0)
    assert (first["hugepages_used"], first["hugepages_total"]) == (15, 15)
    assert (first["memory_used_mb"], first["memory_total_mb"]) == (839, 15170)
    assert (first["hbm_used_mb"], first["hbm_total_mb"]) == (1, 32768)
    assert parsed["processes"] == []


def test_old_86_column_layout_without_hugepages_column() -> None:
    parsed = info("13")
    assert [c["npu"] for c in parsed["chips"]] == [1, 4]
    npu4 = chip(parsed, 4)
    assert (npu4["power_w"], npu4["temp_c"], npu4["bus_id"]) == (65.6, 58.0, "0000:86:00.0")
    assert (npu4["hugepages_used"], npu4["hugepages_total"]) == (None, None)
    assert npu4["hbm_total_mb"] == 32768


def test_wide_26x_layout_after_a_shell_prompt_and_without_closing_border() -> None:
    parsed = info("16")
    assert parsed["tool_version"] == "26.0.rc1"
    (only,) = parsed["chips"]
    assert (only["name"], only["power_w"], only["temp_c"]) == ("910B4", 82.6, 32.0)
    assert (only["hbm_used_mb"], only["hbm_total_mb"]) == (2871, 32768)
    assert parsed["processes"] == []


def test_310b_with_health_alarm_na_bus_id_and_trailing_spaces() -> None:
    (only,) = info("20")["chips"]
    assert only["health"] == "Alarm"
    assert only["bus_id"] is None
    assert only["device"] == 0
    assert (only["power_w"], only["temp_c"]) == (0.0, 65.0)
    assert (only["memory_used_mb"], only["memory_total_mb"]) == (3628, 15609)
    assert (only["hbm_used_mb"], only["hbm_total_mb"]) == (None, None)


def test_310b_doc_example_with_misaligned_temperature() -> None:
    (only,) = info("22")["chips"]
    assert (only["name"], only["power_w"], only["temp_c"]) == ("310B1", 10.4, 66.0)
    assert (only["memory_used_mb"], only["memory_total_mb"]) == (957, 10810)


def test_doc_example_with_two_warnings_and_truncated_process_names() -> None:
    parsed = info("24")
    assert parsed["tool_version"] == "24.1.RC2"
    assert [c["npu"] for c in parsed["chips"] if c["health"] == "Warning"] == [3, 7]
    assert chip(parsed, 3)["power_w"] == 206.9
    assert (chip(parsed, 3)["memory_used_mb"], chip(parsed, 3)["memory_total_mb"]) == (3616, 15039)
    assert chip(parsed, 0)["hugepages_total"] == 1232
    processes = parsed["processes"]
    assert len(processes) == 32
    assert {p["name"] for p in processes} == {"hlt_host_devmm_"}
    assert [p["pid"] for p in processes if p["npu"] == 7] == [37671, 37647, 37655, 37663]


def test_oldest_310_layout_has_four_chips_on_npu_215() -> None:
    parsed = info("26")
    assert parsed["tool_version"] == "20.2.0"
    assert [(c["npu"], c["chip"], c["device"]) for c in parsed["chips"]] == [
        (215, 0, 0),
        (215, 1, 1),
        (215, 2, 2),
        (215, 3, 3),
    ]
    third = chip(parsed, 215, 2)
    assert (third["bus_id"], third["temp_c"], third["memory_total_mb"]) == (
        "0000:DD:00.0",
        57.0,
        8192,
    )
    assert (third["hugepages_used"], third["hbm_total_mb"]) == (None, None)
    assert parsed["processes"] == []


@pytest.mark.parametrize(
    "name",
    sorted(p.name for p in OTHER.glob("*.txt")),
)
def test_other_npu_smi_output_is_refused(name: str) -> None:
    with pytest.raises(NpuSmiParseError, match="expected `npu-smi info` output"):
        parse_info((OTHER / name).read_text())


def test_refusal_of_a_driver_error_quotes_the_error() -> None:
    text = (OTHER / "npu-smi-ERRORS_dcmi-8005_-8020_in-container.txt").read_text()
    with pytest.raises(NpuSmiParseError, match="ret is -8005") as caught:
        parse_info(text)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("text", ["", "  \n\n", "command not found: npu-smi\n"])
def test_empty_or_foreign_text_is_refused(text: str) -> None:
    with pytest.raises(NpuSmiParseError, match="title line"):
        parse_info(text)


def test_title_without_chip_table_is_refused() -> None:
    text = (INFO / INFO_FILES[0]).read_text().splitlines()[:4]
    with pytest.raises(NpuSmiParseError, match=re.escape("'NPU  Name | Health")):
        parse_info("\n".join(text))


def test_a_cut_off_chip_row_is_refused_with_its_line_number() -> None:
    lines = (INFO / INFO_FILES[0]).read_text().splitlines()
    with pytest.raises(NpuSmiParseError, match=r"line 8: a record needs 2 rows"):
        parse_info("\n".join(lines[:8]))


def test_a_malformed_number_is_refused_with_its_line_number() -> None:
    text = (INFO / INFO_FILES[0]).read_text().replace("97.9 ", "hot! ", 1)
    with pytest.raises(NpuSmiParseError, match=r"line 8: 'power' is 'hot!'"):
        parse_info(text)


def identified(prefix: str, mapping: str | None = None) -> list[dict[str, Any]]:
    rows = parse_chip_mapping((OTHER / mapping).read_text()) if mapping else None
    return identify_chips(info(prefix), rows)


def test_numbered_910b_names_are_atlas_a2_for_certain() -> None:
    for prefix in ("01", "03", "06", "16"):
        chips = identified(prefix)
        assert {(c["generation"], c["certain"]) for c in chips} == {("atlas-a2", True)}
    (only,) = identified("16")
    assert only == {
        "npu": 0,
        "chip": 0,
        "name": "910B4",
        "generation": "atlas-a2",
        "certain": True,
        "evidence": "npu-smi name '910B4': Atlas A2, Ascend 910B1-910B4 (soc 220-224)",
    }


def test_bare_910b_with_ddr_beside_32gb_hbm_is_first_generation() -> None:
    chips = identified("29")
    assert len(chips) == 8
    assert {(c["generation"], c["certain"]) for c in chips} == {("910-first-gen", True)}
    assert "DDR 13552 MB beside HBM 32768 MB" in chips[0]["evidence"]
    assert "soc 104" in chips[0]["evidence"]


def test_bare_910b_name_alone_never_means_a2_for_certain() -> None:
    # The A2 captures with their numbered names cut to the colliding "910B".
    a2_64gb = info("01")
    a2_32gb = info("16")
    for parsed in (a2_64gb, a2_32gb):
        for c in parsed["chips"]:
            c["name"] = "910B"
    (by_hbm,) = {(c["generation"], c["certain"]) for c in identify_chips(a2_64gb)}
    assert by_hbm == ("atlas-a2", True)
    (guess,) = identify_chips(a2_32gb)
    assert (guess["generation"], guess["certain"]) == ("atlas-a2", False)
    assert "get_soc_version" in guess["evidence"]


def test_bare_910b_is_decided_by_the_chip_mapping() -> None:
    parsed = info("16")
    parsed["chips"][0]["name"] = "910B"
    mapping = parse_chip_mapping(
        (OTHER / "npu-smi-info-m_910B4_8card_with-Mcu-rows_blog.txt").read_text()
    )
    (only,) = identify_chips(parsed, mapping)
    assert (only["generation"], only["certain"]) == ("atlas-a2", True)
    assert "'Ascend 910B4'" in only["evidence"]


def test_ascend910_with_two_chips_per_npu_is_atlas_a3() -> None:
    chips = identified("07")
    assert len(chips) == 16
    assert {(c["generation"], c["certain"]) for c in chips} == {("atlas-a3", True)}
    assert "2 chips on NPU 0" in chips[0]["evidence"]
    assert "Phy-ID" in chips[0]["evidence"]


def test_first_gen_310_and_310_variants_are_their_own_families() -> None:
    assert {c["generation"] for c in identified("10")} == {"310P"}
    assert {c["generation"] for c in identified("20")} == {"310B"}
    assert {c["generation"] for c in identified("22")} == {"310B"}
    assert {c["generation"] for c in identified("26")} == {"310"}
    assert {c["generation"] for c in identified("12") + identified("13")} == {"910-first-gen"}


def test_placeholder_name_stays_unknown_unless_the_mapping_names_the_chip() -> None:
    alone = identified("24")
    assert {(c["generation"], c["certain"]) for c in alone} == {("unknown", False)}
    assert "'xxx' is not a known chip name" in alone[0]["evidence"]
    mapped = identified(
        "24", "npu-smi-info-m_atlas-800-training-server_model-9010_version-24.1.RC2_mapping.txt"
    )
    assert {(c["generation"], c["certain"]) for c in mapped} == {("910-first-gen", True)}
    assert "'Ascend 910A'" in mapped[0]["evidence"]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workers.collect.npu_smi", *args],
        cwd=REPO_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cli_prints_the_parsed_table_as_json() -> None:
    path = INFO / INFO_FILES[0]
    done = run_cli(str(path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == parse_info(path.read_text())
    assert done.stdout.startswith('{\n  "tool_version": "25.2.0"')


def test_cli_refuses_text_that_is_no_table() -> None:
    done = run_cli(str(OTHER / "npu-smi-info-l_910B4_8card_blog.txt"))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("npu-smi: no npu-smi title line")
    assert "Traceback" not in done.stderr


def test_cli_reports_an_unreadable_file() -> None:
    done = run_cli(str(INFO / "no-such-capture.txt"))
    assert done.returncode == 2
    assert "cannot read" in done.stderr
    assert "Traceback" not in done.stderr
