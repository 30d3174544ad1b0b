from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.ascend_tree import DRIVER_25, TOOLKIT, VERSIONS, body, section, write
from tests.paths import REPO_DIR
from workers.collect.ascend import find_cann, parse_version_cfg, read_driver, read_firmware
from workers.contract.compat import (
    TABLE_PATH,
    check_python_stack,
    check_stack,
    compare_versions,
    is_prerelease,
    load_table,
    pair_verdicts,
    required_for,
    version_in_range,
    version_key,
)

MINDIE = "driver_version.info_24.1.rc2.2_and_version.cfg_8.0.T63_MindIE.txt"
MINDCLUSTER = (
    "driver_24.1.rc1_firmware_7.1.0.11.220_CANN-8.5.0-cann-dir_upgrade-tool_MindCluster-doc.txt"
)
COLLECT_ENV = "collect_env_vllm-ascend_issue6512_CANN8.3.RC2_torch2.8.0.txt"


# --- helpers: file bodies out of the captures, fake install trees -----------


def first(pattern: str, text: str) -> str:
    """The first group of the first line matching ``pattern``."""
    match = re.search(pattern, text, re.MULTILINE)
    assert match, pattern
    return match.group(1)


def stack(root: Path, driver: str | None, firmware: str | None, *toolkits: str) -> list[dict]:
    """check_stack on a tree holding these driver, firmware and toolkit file bodies."""
    if driver is not None:
        write(root, "driver/version.info", driver)
    if firmware is not None:
        write(root, "firmware/version.info", firmware)
    for number, text in enumerate(toolkits):
        write(root, f"ascend-toolkit/{number}/aarch64-linux/ascend_toolkit_install.info", text)
    return check_stack(
        read_driver(str(root)),
        read_firmware(str(root)),
        find_cann(str(root), etc_dir=str(root / "etc")),
    )


def by_pair(entries: list[dict]) -> dict[str, dict]:
    return {entry["pair"]: entry for entry in entries}


DRIVER_25_TEXT = section(DRIVER_25, "driver# cat version.info")
FIRMWARE_25_TEXT = section(DRIVER_25, "firmware# cat version.info")
DRIVER_24_RC2 = section(MINDIE, "cat /usr/local/Ascend/driver/version.info")
DRIVER_24_RC1 = section(MINDCLUSTER, "cat /usr/local/Ascend/driver/version.info")
FIRMWARE_7_1 = section(MINDCLUSTER, "cat /usr/local/Ascend/firmware/version.info")
CANN_8_5 = section(MINDCLUSTER, "cann/aarch64-linux/ascend_toolkit_install.info")


# --- version order -------------------------------------------------------------


@pytest.mark.parametrize(
    ("lower", "higher"),
    [
        ("8.0.RC3", "8.0.0"),
        ("8.0.0", "8.1.RC1"),
        ("8.0.RC1", "8.0.RC3"),
        ("8.0.T63", "8.0.RC1"),
        ("8.0.RC2.alpha001", "8.0.RC2"),
        ("8.3.RC2", "8.5.0"),
        ("8.5.0", "9.0.0"),
        ("6.3.RC3", "6.3.RC3.1"),
        ("23.0.rc3", "23.0.0"),
        ("24.1.rc2", "24.1.rc2.2"),
        ("24.1.RC2", "24.1.rc3"),
        ("25.0.rc1.1", "25.0.0"),
        ("25.0", "25.0.rc1.1"),
        ("7.7.0.1.231", "7.7.99"),
        ("2.1.0.rc1", "2.1.0"),
        ("2.1.0", "2.1.0.post8"),
        ("2.1.0.post8", "2.1.0.post17"),
        ("2.7.1.dev20250724", "2.7.1"),
        ("2.9.0", "2.10.0"),
    ],
)
def test_version_order(lower: str, higher: str) -> None:
    assert compare_versions(lower, higher) == -1
    assert compare_versions(higher, lower) == 1


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("24.1.RC2", "24.1.rc2"),
        ("8.0.rc3", "8.0.RC3"),
        ("2.4.0+cpu", "2.4.0"),
        ("2.8.0+cpu", "2.8.0"),
        ("1.11.0.rc2 (beta)", "1.11.0.rc2"),
    ],
)
def test_versions_that_compare_equal(a: str, b: str) -> None:
    assert compare_versions(a, b) == 0


def test_cann_versions_from_the_fixtures_sort_by_release() -> None:
    found = [
        first(r"^version=(\S+)", body(name))
        for name in (
            TOOLKIT.format("8.5.0_aarch64_cann-8.5.0-layout"),
            TOOLKIT.format("8.1.RC1_x86_64"),
            TOOLKIT.format("8.0.0_aarch64"),
            TOOLKIT.format("8.3.RC2_aarch64"),
            TOOLKIT.format("8.0.RC3_aarch64"),
        )
    ]
    assert sorted(found, key=version_key) == ["8.0.RC3", "8.0.0", "8.1.RC1", "8.3.RC2", "8.5.0"]


def test_prereleases_and_test_builds() -> None:
    assert is_prerelease("8.0.RC2.alpha001")
    assert is_prerelease("8.0.T63")
    assert is_prerelease("2.7.1.dev20250724")
    assert is_prerelease("2.1.0.rc1")
    assert not is_prerelease("8.0.RC3")
    assert not is_prerelease("2.1.0.post8")
    assert not is_prerelease("25.0.rc1.1")


def test_text_without_a_version_is_refused() -> None:
    with pytest.raises(ValueError, match="no version"):
        version_key("  ")


@pytest.mark.parametrize(
    ("version", "low", "high", "inside"),
    [
        ("25.0.rc1.1", "25.0", "25.0.", True),
        ("25.0.0", "25.0", "25.0.", True),
        ("24.1.rc2.2", "24.0", "24.0.", False),
        ("24.1.rc2.2", "24.1", "24.1.", True),
        ("23.0.0", "23.0.0", "23.0.0.", True),
        ("23.0.0.2", "23.0.0", "23.0.0.", True),
        ("23.0.1", "23.0.0", "23.0.0.", False),
        ("23.0.rc3.2", "23.0.rc3", "23.0.rc3.", True),
        ("24.1.rc1", "23.0.rc3", "23.0.rc3.", False),
        ("7.7.0.1.231", "7.0.0", "7.7.99", True),
        ("7.7.0.1.231", "7.0.0", "7.2.99", False),
        ("7.1.0.11.220", "7.0.0", "7.2.99", True),
        ("6.4.0", "7.0.0", "7.7.99", False),
    ],
)
def test_version_ranges_with_open_ended_high_bounds(
    version: str, low: str, high: str, inside: bool
) -> None:
    assert version_in_range(version, low, high) is inside


# --- check_stack -----------------------------------------------------------------


def test_matching_driver_firmware_and_cann_are_ok(tmp_path: Path) -> None:
    toolkit = body(TOOLKIT.format("8.1.RC1_x86_64"))
    entries = by_pair(stack(tmp_path, DRIVER_25_TEXT, FIRMWARE_25_TEXT, toolkit))
    assert list(entries) == [
        "driver 25.0.rc1.1 ↔ firmware 7.7.0.1.231",
        "firmware 7.7.0.1.231 ↔ driver 25.0.rc1.1",
        "driver 25.0.rc1.1 ↔ CANN toolkit 8.1.RC1",
        "CANN toolkit 8.1.RC1 ↔ driver 25.0.rc1.1",
    ]
    assert {entry["verdict"] for entry in entries.values()} == {"ok"}
    assert entries["driver 25.0.rc1.1 ↔ firmware 7.7.0.1.231"]["fields"] == {
        "driver.compatible_version_fw": "[7.0.0,7.7.99]",
        "firmware.Version": "7.7.0.1.231",
        "matched": "[7.0.0,7.7.99]",
    }
    firmware_side = entries["firmware 7.7.0.1.231 ↔ driver 25.0.rc1.1"]
    assert firmware_side["fields"]["matched"] == "[25.0,25.0.]"
    cann_side = entries["CANN toolkit 8.1.RC1 ↔ driver 25.0.rc1.1"]
    assert cann_side["fields"] == {
        "CANN toolkit.compatible_version": (
            "[V100R001C15],[V100R001C18],[V100R001C19],[V100R001C20],[V100R001C21]"
        ),
        "driver.Innerversion": "V100R001C21SPC002B220",
        "matched": "[V100R001C21]",
    }
    driver_side = entries["driver 25.0.rc1.1 ↔ CANN toolkit 8.1.RC1"]
    assert driver_side["fields"]["CANN toolkit.innerversion"] == "V100R001C21SPC001B212"
    assert driver_side["reason"] == (
        "CANN toolkit.innerversion V100R001C21SPC001B212 is within [V100R001C21]"
    )


def test_firmware_that_does_not_list_the_driver_is_incompatible(tmp_path: Path) -> None:
    # The MindCluster doc pairs driver 24.1.rc1 with firmware from HDK 23.0.7.
    entries = by_pair(stack(tmp_path, DRIVER_24_RC1, FIRMWARE_7_1))
    driver_side = entries["driver 24.1.rc1 ↔ firmware 7.1.0.11.220"]
    assert driver_side["verdict"] == "ok"
    assert driver_side["fields"]["matched"] == "[7.0.0,7.2.99]"
    firmware_side = entries["firmware 7.1.0.11.220 ↔ driver 24.1.rc1"]
    assert firmware_side["verdict"] == "incompatible"
    assert firmware_side["fields"] == {
        "firmware.compatible_version_drv": "[23.0.rc3,23.0.rc3.],[23.0.0,23.0.0.]",
        "driver.Version": "24.1.rc1",
    }
    assert firmware_side["reason"] == (
        "driver.Version 24.1.rc1 is not in firmware.compatible_version_drv "
        "[23.0.rc3,23.0.rc3.],[23.0.0,23.0.0.]"
    )


def test_firmware_newer_than_the_drivers_range_is_incompatible(tmp_path: Path) -> None:
    entries = by_pair(stack(tmp_path, DRIVER_24_RC2, FIRMWARE_25_TEXT))
    driver_side = entries["driver 24.1.rc2.2 ↔ firmware 7.7.0.1.231"]
    assert driver_side["verdict"] == "incompatible"
    assert driver_side["fields"]["driver.compatible_version_fw"] == "[7.0.0,7.2.99]"
    assert entries["firmware 7.7.0.1.231 ↔ driver 24.1.rc2.2"]["fields"]["matched"] == (
        "[24.1,24.1.]"
    )


def test_cann_newer_than_the_drivers_list_is_incompatible_one_way(tmp_path: Path) -> None:
    entries = by_pair(stack(tmp_path, DRIVER_24_RC1, None, CANN_8_5))
    driver_side = entries["driver 24.1.rc1 ↔ CANN toolkit 8.5.0"]
    assert driver_side["verdict"] == "incompatible"
    assert driver_side["fields"] == {
        "driver.compatible_version": "[V100R001C30],[V100R001C13],[V100R001C15],[V100R001C17]",
        "CANN toolkit.innerversion": "V100R001C25SPC001B212",
    }
    cann_side = entries["CANN toolkit 8.5.0 ↔ driver 24.1.rc1"]
    assert cann_side["verdict"] == "ok"
    assert cann_side["fields"]["matched"] == "[V100R001C15]"


def test_cann_accepting_a_range_of_driver_inner_versions(tmp_path: Path) -> None:
    toolkit = body(TOOLKIT.format("8.0.RC3_aarch64"))
    entries = by_pair(stack(tmp_path, DRIVER_24_RC2, None, toolkit))
    cann_side = entries["CANN toolkit 8.0.RC3 ↔ driver 24.1.rc2.2"]
    assert cann_side["verdict"] == "ok"
    assert cann_side["fields"]["driver.Innerversion"] == "V100R001C18SPC001B233"
    assert cann_side["fields"]["matched"] == "[V100R001C13,V100R001C19]"
    # The driver's own list stops at C18: it does not name CANN 8.0.RC3 (C19).
    assert entries["driver 24.1.rc2.2 ↔ CANN toolkit 8.0.RC3"]["verdict"] == "incompatible"


def test_missing_firmware_in_a_container_is_unknown(tmp_path: Path) -> None:
    entries = by_pair(stack(tmp_path, DRIVER_25_TEXT, None))
    driver_side = entries["driver 25.0.rc1.1 ↔ firmware (not installed)"]
    assert driver_side["verdict"] == "unknown"
    assert driver_side["reason"] == "firmware is not installed"
    assert driver_side["fields"]["firmware.Version"] is None
    assert entries["firmware (not installed) ↔ driver 25.0.rc1.1"]["verdict"] == "unknown"


def test_a_missing_field_is_unknown_and_named(tmp_path: Path) -> None:
    without_fw_range = "".join(
        line
        for line in DRIVER_25_TEXT.splitlines(keepends=True)
        if "compatible_version_fw" not in line
    )
    entries = by_pair(stack(tmp_path, without_fw_range, FIRMWARE_25_TEXT))
    driver_side = entries["driver 25.0.rc1.1 ↔ firmware 7.7.0.1.231"]
    assert driver_side["verdict"] == "unknown"
    assert driver_side["reason"] == "driver.compatible_version_fw is missing"
    assert driver_side["fields"]["driver.compatible_version_fw"] is None
    assert entries["firmware 7.7.0.1.231 ↔ driver 25.0.rc1.1"]["verdict"] == "ok"


def test_no_driver_for_an_installed_cann_is_unknown(tmp_path: Path) -> None:
    entries = by_pair(stack(tmp_path, None, None, body(TOOLKIT.format("8.3.RC2_aarch64"))))
    assert set(entries) == {
        "driver (not installed) ↔ CANN toolkit 8.3.RC2",
        "CANN toolkit 8.3.RC2 ↔ driver (not installed)",
    }
    assert {e["reason"] for e in entries.values()} == {"driver is not installed"}


def test_cpu_host_has_nothing_to_check(tmp_path: Path) -> None:
    assert stack(tmp_path / "absent", None, None) == []


def test_snapshot_read_back_from_json_gives_the_same_verdicts(tmp_path: Path) -> None:
    toolkit = body(TOOLKIT.format("8.0.RC3_aarch64"))
    write(tmp_path, "driver/version.info", DRIVER_24_RC2)
    write(tmp_path, "firmware/version.info", FIRMWARE_25_TEXT)
    write(tmp_path, "ascend-toolkit/8.0.RC3/aarch64-linux/ascend_toolkit_install.info", toolkit)
    parts = (
        read_driver(str(tmp_path)),
        read_firmware(str(tmp_path)),
        find_cann(str(tmp_path), str(tmp_path / "etc")),
    )
    again = [json.loads(json.dumps(part)) for part in parts]
    assert check_stack(*again) == check_stack(*parts)


# --- torch_npu table -----------------------------------------------------------


def test_the_shipped_table_is_the_fixture_byte_for_byte() -> None:
    assert Path(TABLE_PATH).read_bytes() == (VERSIONS / "compat-torch_npu.csv").read_bytes()
    assert (REPO_DIR / "workers" / "contract" / "data" / "README.md").is_file()


def test_load_table() -> None:
    rows = load_table()
    assert len(rows) == 62
    assert rows[0] == {
        "cann": "9.1.0",
        "torch": "2.12.0",
        "torch_npu": "2.12.0",
        "python_min": "3.10",
        "python_max": "3.14",
        "branch": "v2.12.0-26.1.0",
        "source": (
            "https://github.com/Ascend/pytorch/blob/"
            "9e73e708ab9350d203475609f36f8a43f6a0c2ab/COMPATIBILITY.en.md"
        ),
    }
    no_range = [row for row in rows if row["torch"] == "2.0.1"]
    assert {(row["python_min"], row["python_max"]) for row in no_range} == {(None, None)}
    rows[0]["cann"] = "changed"
    assert load_table()[0]["cann"] == "9.1.0"


def test_a_released_pair_on_its_cann_and_python_is_ok() -> None:
    result = check_python_stack("2.1.0", "2.1.0.post8", "8.0.RC3", "3.8.18")
    assert result["verdict"] == "ok"
    assert result["required"] == {
        "torch_npu": "2.1.0.post8",
        "torch": "2.1.0",
        "cann": ["8.0.RC3"],
        "python_min": "3.8",
        "python_max": "3.11",
        "branch": ["v2.1.0-6.0.rc3"],
    }
    assert [row["branch"] for row in result["matches"]] == ["v2.1.0-6.0.rc3"]


def test_local_torch_version_and_lowercase_cann_still_match() -> None:
    result = check_python_stack("2.4.0+cpu", "2.4.0.post2", "8.0.0", "3.11.7")
    assert result["verdict"] == "ok"


def test_a_later_rc_of_the_listed_cann_line_is_unknown_not_incompatible() -> None:
    text = body(COLLECT_ENV)
    torch = first(r"^\[pip3\] torch==(\S+)", text)
    torch_npu = first(r"^\[pip3\] torch_npu==(\S+)", text)
    cann = first(r"^version=(\S+)", text)
    python = first(r"^Python version: (\S+)", text)
    assert (torch, torch_npu, cann, python) == ("2.8.0+cpu", "2.8.0", "8.3.RC2", "3.11.13")
    result = check_python_stack(torch, torch_npu, cann, python)
    # A later RC of the listed 8.3 line: the table is silent, not against it.
    assert result["verdict"] == "unknown"
    assert (
        "torch_npu 2.8.0 lists CANN 8.3.RC1; 8.3.RC2 is another release of the 8.3 line, "
        "not in the table"
    ) in result["reasons"]
    assert result["matches"] == []
    assert result["required"]["cann"] == ["8.3.RC1"]


def test_torch_from_another_release_is_incompatible() -> None:
    result = check_python_stack("2.4.0", "2.1.0.post8", "8.0.RC3", "3.10")
    assert result["verdict"] == "incompatible"
    assert "torch_npu 2.1.0.post8 is released for torch 2.1.0, not 2.4.0" in result["reasons"]


def test_a_dev_build_not_in_the_table_is_unknown() -> None:
    result = check_python_stack("2.7.1", "2.7.1.dev20250724", "8.2.RC1", "3.10")
    assert result["verdict"] == "unknown"
    assert result["reasons"][0] == (
        "torch_npu 2.7.1.dev20250724 (a dev/pre-release build) is not in the table"
    )
    assert result["required"] == {}


def test_the_mindcluster_dev_build_is_unknown_not_incompatible() -> None:
    pip = section(MINDCLUSTER, "pip list")
    versions = dict(line.split() for line in pip.splitlines())
    result = check_python_stack(versions["torch"], versions["torch-npu"], "8.5.0", None)
    assert versions["torch-npu"] == "2.1.0.post8.dev20241009"
    assert result["verdict"] == "unknown"
    assert "Python not given" in result["reasons"]


def test_an_alpha_cann_of_a_listed_release_is_unknown() -> None:
    cfg = parse_version_cfg(body("version.cfg_8.0.RC2.alpha001_custom-op-FAQ.txt"))
    result = check_python_stack("2.3.1", "2.3.1", cfg["runtime"]["running"]["version"], "3.10")
    assert result["verdict"] == "unknown"
    assert (
        "CANN 8.0.RC2.alpha001 is a build of 8.0.RC2; the table lists only 8.0.RC2"
        in (result["reasons"])
    )


def test_python_out_of_range_is_incompatible() -> None:
    result = check_python_stack("2.6.0", "2.6.0.post3", "8.3.RC1", "3.12.1")
    assert result["verdict"] == "incompatible"
    assert result["reasons"][-1] == "Python 3.12 is outside 3.9 to 3.11 for torch 2.6.0"
    dev = check_python_stack("2.7.1", "2.7.1.dev20250724", "8.3.RC1", "3.8.18")
    assert dev["verdict"] == "incompatible"
    assert dev["reasons"][-1] == "Python 3.8 is outside 3.9 to 3.13 for torch 2.7.1"


def test_torch_without_a_python_range_is_unknown() -> None:
    result = check_python_stack("2.0.1", "2.0.1.post1", "7.0.0", "3.9")
    assert result["verdict"] == "unknown"
    assert result["reasons"][-1] == "the table lists no Python range for torch 2.0.1"


def test_required_for_a_planned_cann_and_torch_npu_line() -> None:
    [row] = required_for(cann="8.3.RC1", torch_npu="2.6.0")
    assert (row["torch"], row["torch_npu"], row["python_min"], row["python_max"]) == (
        "2.6.0",
        "2.6.0.post3",
        "3.9",
        "3.11",
    )
    assert [r["cann"] for r in required_for(torch_npu="2.6.0.post3")] == ["8.3.RC1"]


def test_required_for_a_planned_cann_lists_every_torch() -> None:
    rows = required_for(cann="8.5.0")
    assert [(r["torch"], r["torch_npu"]) for r in rows] == [
        ("2.9.0", "2.9.0"),
        ("2.8.0", "2.8.0.post2"),
        ("2.7.1", "2.7.1.post2"),
        ("2.6.0", "2.6.0.post5"),
    ]
    assert [r["cann"] for r in required_for(cann="8.0.rc3", torch="2.1.0")] == ["8.0.RC3"]
    assert required_for(cann="8.4.0") == []


# --- pair verdicts ------------------------------------------------------------------


def test_the_cann_packages_list_decides_a_driver_cann_pair(tmp_path: Path) -> None:
    toolkit = body(TOOLKIT.format("8.0.RC3_aarch64"))
    pairs = pair_verdicts(stack(tmp_path, DRIVER_24_RC2, FIRMWARE_25_TEXT, toolkit))
    verdicts = {pair["pair"]: pair["verdict"] for pair in pairs}
    # The driver's list stops at C18 but CANN 8.0.RC3 names the driver's C18 among its own.
    assert verdicts["driver 24.1.rc2.2 ↔ CANN toolkit 8.0.RC3"] == "ok"
    cann_pair = next(p for p in pairs if p["pair"] == "driver 24.1.rc2.2 ↔ CANN toolkit 8.0.RC3")
    assert cann_pair["reason"].endswith("; the driver's own list predates this CANN")
    assert [d["verdict"] for d in cann_pair["directions"]] == ["incompatible", "ok"]
    # Driver and firmware must accept each other: one refusal decides.
    assert verdicts["driver 24.1.rc2.2 ↔ firmware 7.7.0.1.231"] == "incompatible"


def test_a_cann_without_a_driver_list_leaves_the_verdict_to_the_driver(tmp_path: Path) -> None:
    toolkit = "\n".join(
        line
        for line in body(TOOLKIT.format("8.0.RC3_aarch64")).splitlines()
        if not line.startswith("compatible_version")
    )
    pairs = pair_verdicts(stack(tmp_path, DRIVER_24_RC2, None, toolkit))
    cann_pair = pairs[-1]
    assert cann_pair["verdict"] == "incompatible"
    assert "is not in driver.compatible_version" in cann_pair["reason"]


def test_a_pair_with_a_missing_side_is_unknown(tmp_path: Path) -> None:
    pairs = pair_verdicts(stack(tmp_path, DRIVER_25_TEXT, None))
    assert [(p["pair"], p["verdict"]) for p in pairs] == [
        ("driver 25.0.rc1.1 ↔ firmware (not installed)", "unknown")
    ]
