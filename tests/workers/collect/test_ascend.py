from __future__ import annotations

from pathlib import Path

import pytest

from harness.ascend_tree import (
    TOOLKIT,
    body,
    driver_25,
    firmware_25,
    link,
    section,
    write,
)
from workers.collect.ascend import (
    AscendParseError,
    find_cann,
    parse_bracket_list,
    parse_key_values,
    parse_version_cfg,
    read_driver,
    read_firmware,
)

MINDIE = "driver_version.info_24.1.rc2.2_and_version.cfg_8.0.T63_MindIE.txt"
MINDCLUSTER = (
    "driver_24.1.rc1_firmware_7.1.0.11.220_CANN-8.5.0-cann-dir_upgrade-tool_MindCluster-doc.txt"
)
SET_ENV = "set_env.sh_CANN-8.0.0_and_version.cfg_8.0.0.txt"
ETC = "etc_ascend_install.info_examples.txt"
CFG_629 = "cann_component_running_versions_8.1.RC1_issue629.txt"


# --- helpers: file bodies out of the captures, fake install trees -----------


# --- parse_key_values --------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "version", "inner", "arch", "path"),
    [
        (
            "8.0.0_aarch64",
            "8.0.0",
            "V100R001C20SPC001B251",
            "aarch64",
            "/usr/local/Ascend/ascend-toolkit/8.0.0/aarch64-linux",
        ),
        (
            "8.0.RC3_aarch64",
            "8.0.RC3",
            "V100R001C19SPC001B155",
            "aarch64",
            "/usr/local/Ascend/ascend-toolkit/8.0.RC3/aarch64-linux",
        ),
        (
            "8.1.RC1_aarch64_cat-command",
            "8.1.RC1",
            "V100R001C21SPC001B238",
            "aarch64",
            "/usr/local/Ascend/ascend-toolkit/8.1.RC1/aarch64-linux",
        ),
        (
            "8.1.RC1_x86_64",
            "8.1.RC1",
            "V100R001C21SPC001B212",
            "x86_64",
            "/usr/local/Ascend/ascend-toolkit/8.1.RC1/x86_64-linux",
        ),
        (
            "8.3.RC2_aarch64",
            "8.3.RC2",
            "V100R001C23SPC002B210",
            "aarch64",
            "/usr/local/Ascend/ascend-toolkit/8.3.RC2/aarch64-linux",
        ),
        (
            "8.5.0_aarch64_cann-8.5.0-layout",
            "8.5.0",
            "V100R001C25SPC001B232",
            "aarch64",
            "/usr/local/Ascend/cann-8.5.0",
        ),
    ],
)
def test_every_toolkit_install_info_parses(
    name: str, version: str, inner: str, arch: str, path: str
) -> None:
    # The 8.1.RC1 capture still holds the `cat` prompt line: it has no '=' and is skipped.
    pairs = parse_key_values(body(TOOLKIT.format(name)))
    assert pairs["package_name"] == "Ascend-cann-toolkit"
    assert (pairs["version"], pairs["innerversion"], pairs["arch"]) == (version, inner, arch)
    assert pairs["path"] == path
    assert pairs["compatible_version"].startswith("[V100R001C")


def test_driver_version_info_keeps_keys_as_printed() -> None:
    pairs = parse_key_values(driver_25())
    assert pairs["Version"] == "25.0.rc1.1"
    assert pairs["Innerversion"] == "V100R001C21SPC002B220"
    assert pairs["compatible_version"] == (
        "[V100R001C17],[V100R001C18],[V100R001C19],[V100R001C20],[V100R001C21]"
    )
    assert pairs["compatible_version_fw"] == "[7.0.0,7.7.99]"
    assert pairs["package_version"] == "25.0.rc1.1"
    assert pairs["ascendhal_version"] == "7.35.23"


def test_firmware_version_info_parses() -> None:
    pairs = parse_key_values(firmware_25())
    assert pairs == {
        "Version": "7.7.0.1.231",
        "firmware_version": "1.0",
        "package_version": "25.0.rc1.1",
        "compatible_version_drv": "[23.0.0,23.0.0.],[24.0,24.0.],[24.1,24.1.],[25.0,25.0.]",
    }


def test_key_values_tolerate_crlf_spaces_comments_and_blank_lines() -> None:
    clean = driver_25()
    messy = "# copied from a Windows share\r\n\r\n" + "\r\n".join(
        "  " + line.replace("=", " = ", 1) + "  " for line in clean.splitlines()
    )
    assert parse_key_values(messy) == parse_key_values(clean)


def test_mindcluster_driver_without_package_version_parses() -> None:
    pairs = parse_key_values(section(MINDCLUSTER, "cat /usr/local/Ascend/driver/version.info"))
    assert pairs["Version"] == "24.1.rc1"
    assert pairs["compatible_version"] == "[V100R001C30],[V100R001C13],[V100R001C15],[V100R001C17]"
    assert "package_version" not in pairs


def test_colon_separated_nnal_version_info_parses() -> None:
    pairs = parse_key_values(section(MINDIE, "nnal/atb/latest/version.info"), sep=":")
    assert pairs["Ascend-cann-atb"] == "8.0.T63"
    assert pairs["Ascend-cann-atb Version"] == "8.0.T63.B020"
    assert pairs["Platform"] == "aarch64"


@pytest.mark.parametrize("marker", ["(1) source", "(2) source"])
def test_both_etc_ascend_install_info_examples_parse(marker: str) -> None:
    pairs = parse_key_values(section(ETC, marker, until_comment=True))
    assert pairs["Driver_Install_Path_Param"] == "/usr/local/Ascend"
    assert pairs["Firmware_Install_Path_Param"] == "/usr/local/Ascend"
    assert pairs["UserName"] == "HwHiAiUser"


def test_text_without_key_values_is_refused() -> None:
    logs = body("driver_firmware_install_logs_25.0.rc1.1_fw-7.7.0.1.231_blog.txt")
    lspci = "\n".join(line for line in logs.splitlines() if "Device d802" in line)
    with pytest.raises(AscendParseError, match="not an Ascend version file"):
        parse_key_values(lspci)


# --- parse_bracket_list ------------------------------------------------------


def test_bracket_list_of_inner_versions() -> None:
    value = parse_key_values(driver_25())["compatible_version"]
    assert parse_bracket_list(value) == [
        "V100R001C17",
        "V100R001C18",
        "V100R001C19",
        "V100R001C20",
        "V100R001C21",
    ]


def test_bracket_list_keeps_ranges_and_trailing_dots_as_written() -> None:
    firmware = parse_key_values(firmware_25())
    assert parse_bracket_list(firmware["compatible_version_drv"]) == [
        ("23.0.0", "23.0.0."),
        ("24.0", "24.0."),
        ("24.1", "24.1."),
        ("25.0", "25.0."),
    ]
    assert parse_bracket_list(parse_key_values(driver_25())["compatible_version_fw"]) == [
        ("7.0.0", "7.7.99")
    ]
    mindcluster = parse_key_values(
        section(MINDCLUSTER, "cat /usr/local/Ascend/firmware/version.info")
    )
    assert parse_bracket_list(mindcluster["compatible_version_drv"]) == [
        ("23.0.rc3", "23.0.rc3."),
        ("23.0.0", "23.0.0."),
    ]


def test_bracket_list_mixes_an_inner_version_range_and_a_single_one() -> None:
    value = parse_key_values(body(TOOLKIT.format("8.0.RC3_aarch64")))["compatible_version"]
    assert parse_bracket_list(value) == [("V100R001C13", "V100R001C19"), "V100R001C30"]


def test_empty_bracket_list_is_empty_and_junk_is_refused() -> None:
    assert parse_bracket_list("") == []
    with pytest.raises(AscendParseError, match="not a list"):
        parse_bracket_list("7.0.0,7.7.99")
    with pytest.raises(AscendParseError, match="neither one version nor a range"):
        parse_bracket_list("[1,2,3]")


# --- parse_version_cfg -------------------------------------------------------


def test_version_cfg_with_several_installed_versions() -> None:
    components = parse_version_cfg(body(CFG_629))
    assert set(components) == {
        "runtime",
        "compiler",
        "hccl",
        "opp",
        "toolkit",
        "aoe",
        "ncs",
        "opp_kernel",
    }
    runtime = components["runtime"]
    assert runtime["running"] == {"inner": "7.7.T20.0.B210", "version": "8.1.RC1"}
    assert runtime["upgrade"] == {"inner": "7.7.T20.0.B210", "version": "8.1.RC1"}
    assert runtime["installed"] == [
        {"inner": "7.7.T9.0.B057", "version": "8.1.T6"},
        {"inner": "7.7.T20.0.B210", "version": "8.1.RC1"},
    ]
    assert [v["version"] for v in components["opp_kernel"]["installed"]] == [
        "8.1.T6",
        "8.1.RC1",
        "8.1.RC1",
    ]


def test_version_cfg_with_running_lines_only() -> None:
    components = parse_version_cfg(body("version.cfg_8.0.RC3_running-only.txt"))
    assert len(components) == 8
    toolkit = components["toolkit"]
    assert toolkit["running"] == {"inner": "7.5.0.1.129", "version": "8.0.RC3"}
    assert toolkit["upgrade"] is None
    assert toolkit["installed"] == []


def test_version_cfg_with_an_alpha_version() -> None:
    components = parse_version_cfg(body("version.cfg_8.0.RC2.alpha001_custom-op-FAQ.txt"))
    assert components == {
        "runtime": {
            "running": {"inner": "7.2.T11.0.B218", "version": "8.0.RC2.alpha001"},
            "upgrade": {"inner": "7.2.T11.0.B218", "version": "8.0.RC2.alpha001"},
            "installed": [{"inner": "7.2.T11.0.B218", "version": "8.0.RC2.alpha001"}],
        }
    }


def test_version_cfg_after_a_blank_line_and_from_the_mindie_image() -> None:
    release = parse_version_cfg(section(SET_ENV, "latest/version.cfg"))
    assert release["ncs"]["running"] == {"inner": "7.6.0.1.220", "version": "8.0.0"}
    assert "opp_kernel" not in release
    mindie = parse_version_cfg(section(MINDIE, "latest/version.cfg"))
    assert mindie["opp_kernel"]["installed"] == [{"inner": "7.6.T13.0.B094", "version": "8.0.T63"}]


def test_install_info_is_no_version_cfg() -> None:
    with pytest.raises(AscendParseError, match=r"not a version\.cfg"):
        parse_version_cfg(body(TOOLKIT.format("8.0.0_aarch64")))


# --- read_driver / read_firmware ---------------------------------------------


def test_read_driver_and_firmware(tmp_path: Path) -> None:
    write(tmp_path, "driver/version.info", driver_25())
    write(tmp_path, "firmware/version.info", firmware_25())
    driver = read_driver(str(tmp_path))
    assert driver == {
        "path": str(tmp_path / "driver" / "version.info"),
        "installed": True,
        "version": "25.0.rc1.1",
        "inner_version": "V100R001C21SPC002B220",
        "package_version": "25.0.rc1.1",
        "accepts_cann": [
            "V100R001C17",
            "V100R001C18",
            "V100R001C19",
            "V100R001C20",
            "V100R001C21",
        ],
        "accepts_firmware": [("7.0.0", "7.7.99")],
        "raw": {
            "Version": "25.0.rc1.1",
            "Innerversion": "V100R001C21SPC002B220",
            "compatible_version": (
                "[V100R001C17],[V100R001C18],[V100R001C19],[V100R001C20],[V100R001C21]"
            ),
            "compatible_version_fw": "[7.0.0,7.7.99]",
        },
    }
    firmware = read_firmware(str(tmp_path))
    assert firmware["version"] == "7.7.0.1.231"
    assert firmware["package_version"] == "25.0.rc1.1"
    assert firmware["accepts_driver"] == [
        ("23.0.0", "23.0.0."),
        ("24.0", "24.0."),
        ("24.1", "24.1."),
        ("25.0", "25.0."),
    ]
    assert "error" not in firmware


def test_driver_without_package_version_reads_as_none(tmp_path: Path) -> None:
    write(
        tmp_path,
        "driver/version.info",
        section(MINDCLUSTER, "cat /usr/local/Ascend/driver/version.info"),
    )
    driver = read_driver(str(tmp_path))
    assert driver["version"] == "24.1.rc1"
    assert driver["inner_version"] == "V100R001C15SPC006B220"
    assert driver["package_version"] is None
    assert driver["accepts_firmware"] == [("7.0.0", "7.2.99")]


def test_unreadable_driver_records_its_error(tmp_path: Path) -> None:
    (tmp_path / "driver" / "version.info").mkdir(parents=True)
    driver = read_driver(str(tmp_path))
    assert driver["installed"] is True
    assert driver["version"] is None
    assert driver["error"].startswith("IsADirectoryError")


# --- CPU host ----------------------------------------------------------------


def test_cpu_host_without_ascend_is_not_installed(tmp_path: Path) -> None:
    root = str(tmp_path / "usr-local-Ascend")
    etc = str(tmp_path / "etc")
    assert read_driver(root)["installed"] is False
    assert read_driver(root)["version"] is None
    assert read_firmware(root)["installed"] is False
    cann = find_cann(root, etc_dir=etc)
    assert cann == {
        "root": root,
        "installed": False,
        "installs": [],
        "version_cfgs": [],
        "links": [],
        "etc": {"ascend_install": None, "ascend_cann_install": None},
        "reason": f"{root} does not exist: no Ascend software installed",
    }
    assert "error" not in read_driver(root)


# --- find_cann -----------------------------------------------------------------


def build_classic_tree(root: Path, etc: Path) -> None:
    """Two toolkits, latest -> 8.1.RC1, a dangling nnae/latest, nnal atb, /etc record."""
    toolkit = root / "ascend-toolkit"
    write(
        toolkit,
        "8.0.RC3/aarch64-linux/ascend_toolkit_install.info",
        body(TOOLKIT.format("8.0.RC3_aarch64")),
    )
    write(
        toolkit,
        "8.1.RC1/aarch64-linux/ascend_toolkit_install.info",
        body(TOOLKIT.format("8.1.RC1_aarch64_cat-command")),
    )
    link(toolkit, "8.1.RC1/arm64-linux", "aarch64-linux")
    write(toolkit, "8.1.RC1/version.cfg", body(CFG_629))
    link(toolkit, "latest", "8.1.RC1")
    link(root, "nnae/latest", "8.0.0")
    write(root, "nnal/atb/8.0.T63/version.info", section(MINDIE, "nnal/atb/latest/version.info"))
    link(root, "nnal/atb/latest", "8.0.T63")
    write(etc, "ascend_install.info", section(ETC, "(1) source", until_comment=True))


def test_find_cann_reads_every_toolkit_once(tmp_path: Path) -> None:
    root, etc = tmp_path / "Ascend", tmp_path / "etc"
    build_classic_tree(root, etc)
    cann = find_cann(str(root), etc_dir=str(etc))
    assert cann["installed"] is True
    assert "errors" not in cann
    toolkits = [i for i in cann["installs"] if i["kind"] == "toolkit"]
    assert [(i["version"], i["inner_version"], i["arch"]) for i in toolkits] == [
        ("8.0.RC3", "V100R001C19SPC001B155", "aarch64"),
        ("8.1.RC1", "V100R001C21SPC001B238", "aarch64"),
    ]
    assert toolkits[0] == {
        "path": str(root / "ascend-toolkit/8.0.RC3/aarch64-linux/ascend_toolkit_install.info"),
        "source": "install_info",
        "kind": "toolkit",
        "version": "8.0.RC3",
        "inner_version": "V100R001C19SPC001B155",
        "arch": "aarch64",
        "install_path": "/usr/local/Ascend/ascend-toolkit/8.0.RC3/aarch64-linux",
        "accepts_driver": [("V100R001C13", "V100R001C19"), "V100R001C30"],
        "raw": {
            "innerversion": "V100R001C19SPC001B155",
            "compatible_version": "[V100R001C13,V100R001C19],[V100R001C30]",
        },
    }


def test_find_cann_reads_nnal_version_cfg_and_etc(tmp_path: Path) -> None:
    root, etc = tmp_path / "Ascend", tmp_path / "etc"
    build_classic_tree(root, etc)
    cann = find_cann(str(root), etc_dir=str(etc))
    nnal = [i for i in cann["installs"] if i["kind"] == "nnal"]
    assert nnal == [
        {
            "path": str(root / "nnal/atb/8.0.T63/version.info"),
            "source": "nnal",
            "kind": "nnal",
            "component": "atb",
            "version": "8.0.T63",
            "build": "8.0.T63.B020",
            "arch": "aarch64",
        }
    ]
    [cfg] = cann["version_cfgs"]
    assert cfg["path"] == str(root / "ascend-toolkit/8.1.RC1/version.cfg")
    assert cfg["running"]["toolkit"] == "8.1.RC1"
    assert cfg["installed"] == ["8.1.RC1", "8.1.T6"]
    assert cann["etc"]["ascend_install"] == {
        "path": str(etc / "ascend_install.info"),
        "driver_install_path": "/usr/local/Ascend",
        "firmware_install_path": "/usr/local/Ascend",
    }
    assert cann["etc"]["ascend_cann_install"] is None


def test_find_cann_reports_latest_links_and_the_dangling_one(tmp_path: Path) -> None:
    root, etc = tmp_path / "Ascend", tmp_path / "etc"
    build_classic_tree(root, etc)
    links = {entry["path"]: entry for entry in find_cann(str(root), str(etc))["links"]}
    assert links[str(root / "ascend-toolkit/latest")] == {
        "path": str(root / "ascend-toolkit/latest"),
        "target": "8.1.RC1",
        "dangling": False,
    }
    assert links[str(root / "nnae/latest")]["dangling"] is True
    assert links[str(root / "nnae/latest")]["target"] == "8.0.0"
    assert links[str(root / "nnal/atb/latest")]["dangling"] is False


def test_find_cann_reads_the_cann_8_5_layout(tmp_path: Path) -> None:
    root = tmp_path / "Ascend"
    write(
        root,
        "cann-8.5.0/aarch64-linux/ascend_toolkit_install.info",
        body(TOOLKIT.format("8.5.0_aarch64_cann-8.5.0-layout")),
    )
    link(root, "cann", "cann-8.5.0")
    link(root, "ascend-toolkit/latest", "../cann-8.5.0")
    cann = find_cann(str(root), etc_dir=str(tmp_path / "etc"))
    [install] = cann["installs"]
    assert install["version"] == "8.5.0"
    assert install["inner_version"] == "V100R001C25SPC001B232"
    assert install["install_path"] == "/usr/local/Ascend/cann-8.5.0"
    assert install["accepts_driver"][-1] == "V100R001C23"
    assert {(e["path"], e["target"], e["dangling"]) for e in cann["links"]} == {
        (str(root / "cann"), "cann-8.5.0", False),
        (str(root / "ascend-toolkit/latest"), "../cann-8.5.0", False),
    }


def test_find_cann_reads_both_arches_under_the_cann_folder(tmp_path: Path) -> None:
    root = tmp_path / "Ascend"
    for arch in ("aarch64", "x86_64"):
        write(
            root,
            f"cann/{arch}-linux/ascend_toolkit_install.info",
            section(MINDCLUSTER, f"cann/{arch}-linux/ascend_toolkit_install.info"),
        )
    cann = find_cann(str(root), etc_dir=str(tmp_path / "etc"))
    assert [(i["arch"], i["version"], i["install_path"]) for i in cann["installs"]] == [
        ("aarch64", "8.5.0", "/usr/local/Ascend/cann-8.5.0/aarch64-linux"),
        ("x86_64", "8.5.0", "/usr/local/Ascend/cann-8.5.0/x86_64-linux"),
    ]


def build_latest_folder(root: Path) -> None:
    """The MindIE image: ``latest/`` is a folder of links into ../8.2.RC2/, opp_kernel missing."""
    listing = section(MINDIE, "ll /usr/local/Ascend/ascend-toolkit/latest/").splitlines()
    latest = root / "ascend-toolkit" / "latest"
    for line in listing[1:]:  # the first line is "total 20"
        mode, name = line.split()[0], line.split()[8]
        if mode.startswith("l"):
            target = line.split(" -> ")[1]
            link(latest, name, target)
            # Every target exists but ../8.2.RC2/opp_kernel: that link dangles.
            if name != "opp_kernel":
                (latest / target).mkdir(parents=True, exist_ok=True)
        elif mode.startswith("d"):
            (latest / name).mkdir(parents=True, exist_ok=True)
    write(latest, "version.cfg", section(MINDIE, "latest/version.cfg"))


def test_find_cann_reads_a_latest_folder_of_links(tmp_path: Path) -> None:
    root = tmp_path / "Ascend"
    build_latest_folder(root)
    cann = find_cann(str(root), etc_dir=str(tmp_path / "etc"))
    [latest] = cann["links"]
    assert latest == {
        "path": str(root / "ascend-toolkit/latest"),
        "target": None,
        "directory": True,
        "points_into": ["8.2.RC2"],
        "dangling": True,
        "dangling_links": ["opp_kernel"],
    }
    # version.cfg says 8.0.T63 while the links point into 8.2.RC2: both are evidence.
    [cfg] = cann["version_cfgs"]
    assert set(cfg["running"].values()) == {"8.0.T63"}
    assert cann["installed"] is False
    assert cann["reason"] == f"no CANN install info under {root}"
