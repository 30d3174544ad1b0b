"""The npu-smi parsers of telemetry, on the real captured outputs."""

from __future__ import annotations

import pytest

from tests.workers.telemetry.conftest import DOC, ERRORS, INFO, OTHER, section
from workers.collect.npu_smi import NpuSmiParseError, parse_info
from workers.contract import telemetry as contract
from workers.telemetry import npu

TABLES = sorted(INFO.glob("*.txt"))


def table(name: str) -> dict[int, dict]:
    text = next(INFO.glob(f"{name}_*.txt")).read_text(encoding="utf-8")
    return npu.table_samples(parse_info(text), 1.0, {}, "process id" in text.lower())


@pytest.mark.parametrize("path", TABLES, ids=lambda path: path.name[:2])
def test_every_captured_table_gives_valid_samples_with_memory_and_temperature(path) -> None:
    text = path.read_text(encoding="utf-8")
    info = parse_info(text)
    samples = npu.table_samples(info, 1.0, {}, "process id" in text.lower())
    assert len(samples) == len(info["chips"])
    for sample in samples.values():
        sample.pop("_chip")
        assert contract.validate_sample(sample)["readings"] == sample["readings"]
        assert sample["readings"]["memory_total_mb"] > 0
        assert "temperature_c" in sample["readings"]


def test_the_alarm_card_is_alarm_with_its_ddr_as_memory() -> None:
    (sample,) = table("20").values()
    assert sample["health"] == contract.HEALTH_ALARM
    assert sample["readings"] == {
        "temperature_c": 65.0,
        "power_w": 0.0,
        "utilization_pct": 0.0,
        "memory_used_mb": 3628.0,
        "memory_total_mb": 15609.0,
    }
    # No process table in that capture: no process count is claimed.
    assert sample["processes"] == []


def test_the_two_warning_cards_and_their_processes() -> None:
    samples = table("24")
    assert [i for i, s in samples.items() if s["health"] == contract.HEALTH_WARNING] == [3, 7]
    assert {s["health"] for i, s in samples.items() if i not in (3, 7)} == {contract.HEALTH_OK}
    warning = samples[3]
    assert warning["readings"]["power_w"] == 206.9
    # First-gen 910: DDR 3616 / 15039 beside HBM 0 / 32768; the device memory is the HBM.
    assert warning["readings"]["memory_used_mb"] == 0.0
    assert warning["readings"]["memory_total_mb"] == 32768.0
    assert warning["readings"]["process_count"] == 4.0
    assert sorted(p["pid"] for p in warning["processes"]) == [37643, 37651, 37659, 37667]
    assert warning["processes"][0] == {"pid": 37643, "name": "hlt_host_devmm_", "memory_mb": 686}


def test_310p_power_is_absent_and_the_device_column_is_the_logic_id() -> None:
    samples = table("10")
    assert sorted(samples) == list(range(8))
    assert all("power_w" not in s["readings"] for s in samples.values())
    assert samples[5]["_chip"] == (32768, 1)
    assert samples[5]["readings"]["memory_total_mb"] == 43693.0
    assert samples[5]["readings"]["process_count"] == 0.0


def test_a3_second_die_has_no_power_and_logic_ids_follow_the_mapping() -> None:
    text = next(INFO.glob("07_*.txt")).read_text(encoding="utf-8")
    mapping = {(npu_id, chip): 15 - (2 * npu_id + chip) for npu_id in range(8) for chip in (0, 1)}
    samples = npu.table_samples(parse_info(text), 1.0, mapping, True)
    assert samples[15]["_chip"] == (0, 0)
    assert "power_w" not in samples[14]["readings"]
    assert samples[15]["readings"]["power_w"] == 178.7


def test_several_processes_on_one_npu_with_empty_names() -> None:
    samples = table("06")
    assert samples[0]["readings"]["process_count"] == 8.0
    assert {p["name"] for p in samples[0]["processes"]} == {""}


@pytest.mark.parametrize(
    ("value", "state"),
    [
        ("OK", contract.HEALTH_OK),
        ("Warning", contract.HEALTH_WARNING),
        ("Alarm", contract.HEALTH_ALARM),
        ("Critical", contract.HEALTH_CRITICAL),
        ("UNKNOWN", contract.HEALTH_UNKNOWN),
        (None, contract.HEALTH_UNKNOWN),
    ],
)
def test_health_states_as_the_docs_list_them(value, state) -> None:
    assert npu.health_state(value) == state


def test_usages_of_one_chip() -> None:
    values = npu.parse_key_values(section(DOC, "npu-smi info -t usages -i 0 -c 0"))
    assert values["aicpu usage rate(%)"] == "9"
    assert npu.usages_readings(values) == {
        "utilization_pct": 0.0,
        "aicpu_pct": 9.0,
        "memory_bandwidth_pct": 1.0,
    }


def test_usages_of_a_64gb_hbm_chip_prefer_the_hbm_bandwidth() -> None:
    path = OTHER / "npu-smi-info-t-usages_910B-64GB_msserviceprofiler-test-fixture.txt"
    values = npu.parse_key_values(path.read_text(encoding="utf-8"))
    assert npu.usages_readings(values) == {
        "utilization_pct": 0.0,
        "aicpu_pct": 0.0,
        "memory_bandwidth_pct": 0.0,
    }
    assert npu.memory_readings(values) == {"memory_total_mb": 65536.0}


def test_ecc_counts() -> None:
    values = npu.parse_key_values(section(DOC, "npu-smi info -t ecc -i 0 -c 0"))
    assert npu.ecc_readings(values) == {"ecc_single_bit_errors": 0.0, "ecc_double_bit_errors": 0.0}


def test_ecc_isolated_pages_and_hbm_counts_are_summed_and_aggregates_left_out() -> None:
    # Not a capture: the key spelling of the 910 server docs' `-t ecc`, to pin the matching.
    text = (
        "        DDR Single Bit Error Count               : 1\n"
        "        HBM Single Bit Error Count               : 2\n"
        "        HBM Double Bit Error Count               : 0\n"
        "        HBM Single Bit Aggregate Total Err Cnt   : 90\n"
        "        HBM Single Bit Isolated Pages Count      : 3\n"
        "        HBM Double Bit Isolated Pages Count      : 1\n"
    )
    assert npu.ecc_readings(npu.parse_key_values(text)) == {
        "ecc_single_bit_errors": 3.0,
        "ecc_double_bit_errors": 0.0,
        "retired_pages": 4.0,
    }


def test_memory_of_one_chip_is_its_hbm() -> None:
    path = OTHER / "npu-smi-info-l_and_t-memory_910B-A3-16npu_awesome-ascend-skills-78.txt"
    values = npu.parse_key_values(section(path, "# npu-smi info -t memory -i  1 -c 0"))
    assert npu.memory_readings(values) == {"memory_total_mb": 65536.0}
    # HBM Temperature is the memory's, not the chip's.
    assert npu.temp_readings(values) == {}


def test_power_and_temperature_from_the_common_query() -> None:
    path = OTHER / "npu-smi-info-t-common_910-firstgen_OFFICIAL-DOC-MindCluster.txt"
    values = npu.parse_key_values(path.read_text(encoding="utf-8"))
    assert npu.power_readings(values) == {"power_w": 71.7}
    assert npu.temp_readings(values) == {"temperature_c": 41.0}


def test_health_detail_of_one_chip() -> None:
    values = npu.parse_key_values(section(DOC, "npu-smi info -t health -i 0 -c 0"))
    assert npu.health_detail(values) == (contract.HEALTH_OK, "error code NA: NA")
    # Without -c the chip's Health comes first, then the MCU's: the chip's is read.
    chip = npu.parse_key_values(section(DOC, "npu-smi info -t health -i 0"))
    assert chip["health"] == "OK"
    assert chip["chip name"] == "MCU"


def test_a_dcmi_error_instead_of_key_values_is_quoted() -> None:
    text = ERRORS.read_text(encoding="utf-8").split("# (2)")[0]
    with pytest.raises(NpuSmiParseError, match=r"ret is -8005"):
        npu.parse_key_values(text)
    with pytest.raises(NpuSmiParseError, match="no 'key : value' lines"):
        npu.parse_key_values("+-----+\n")
