"""``python -m workers.collect``: one snapshot document, every section on its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.ascend_tree import build_ascend_tree
from tests.paths import ASCEND_FIXTURES, REPO_DIR
from tests.workers.test_run_cli import python38
from workers.collect.doctor import diagnose
from workers.collect.snapshot import collect

NPU_SMI = ASCEND_FIXTURES / "npu-smi-info"
A2_8CARD = NPU_SMI / "01_910B3_8card_npu-smi-25.2.0_procs_and_no-running.txt"
ALARM = NPU_SMI / "20_310B4_npu-smi-23.0.0_Health-ALARM_no-HBM.txt"
SECTIONS = ["host", "npu", "ascend", "python", "env", "cuda", "findings"]


def run_collector(*args: str, python: str = sys.executable, **env: str) -> dict:
    environ = dict(os.environ, PYTHONPATH=str(REPO_DIR), **env)
    done = subprocess.run(
        [python, "-m", "workers.collect", *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def ids(findings: list[dict]) -> list[str]:
    return [finding["id"] for finding in findings]


def test_an_npu_host_snapshot_has_every_section(tmp_path: Path) -> None:
    root = build_ascend_tree(tmp_path / "Ascend")
    snapshot = run_collector(
        "--ascend-root", str(root), "--etc-dir", str(tmp_path), "--npu-smi-output", str(A2_8CARD)
    )
    assert snapshot["schema"] == 1
    assert [key for key in snapshot if key in SECTIONS] == SECTIONS
    assert snapshot["host"]["arch"]
    npu = snapshot["npu"]
    assert (npu["tool_version"], len(npu["chips"])) == ("25.2.0", 8)
    assert {ident["generation"] for ident in npu["identity"]} == {"atlas-a2"}
    ascend = snapshot["ascend"]
    assert (ascend["driver"]["version"], ascend["firmware"]["version"]) == (
        "25.0.rc1.1",
        "7.7.0.1.231",
    )
    assert [i["version"] for i in ascend["cann"]["installs"]] == ["8.1.RC1"]
    assert {pair["verdict"] for pair in ascend["compatibility"]} == {"ok"}
    assert snapshot["python"]["executable"] == sys.executable
    assert snapshot["python"]["packages"]["django"]
    assert snapshot["collector"]["seconds"] > 0
    # npu-smi 25.2.0 beside driver 25.0.rc1.1: a partial upgrade.
    assert "npu-smi-driver-mismatch" in ids(snapshot["findings"])


def test_a_cpu_host_is_a_finding_not_a_crash(tmp_path: Path) -> None:
    snapshot = run_collector("--ascend-root", str(tmp_path / "none"), PATH="/usr/bin:/bin")
    assert snapshot["npu"] == {"present": False}
    assert snapshot["ascend"]["cann"]["installed"] is False
    assert "no Ascend software installed" in snapshot["ascend"]["cann"]["reason"]
    assert snapshot["ascend"]["compatibility"] == []
    assert ids(snapshot["findings"]) == ["npu-smi-missing"]


def test_text_that_is_no_npu_smi_table_is_recorded_in_its_section(tmp_path: Path) -> None:
    error = ASCEND_FIXTURES / "npu-smi-other/npu-smi-ERRORS_dcmi-8005_-8020_in-container.txt"
    snapshot = run_collector("--ascend-root", str(tmp_path), "--npu-smi-output", str(error))
    assert "npu-smi failed" in snapshot["npu"]["info_error"]
    assert snapshot["python"]["version"]  # the other sections are still there
    assert "npu-smi-failed" in ids(snapshot["findings"])


def test_a_broken_section_keeps_its_error_and_the_rest() -> None:
    snapshot = collect(npu_smi_output="/nonexistent/npu-smi.txt", probe_torch_npu=False)
    assert snapshot["npu"]["error"].startswith("FileNotFoundError")
    assert "npu-unreadable" in ids(snapshot["findings"])
    assert snapshot["host"]["hostname"]


def test_secrets_in_the_environment_are_redacted(tmp_path: Path) -> None:
    snapshot = run_collector(
        "--ascend-root",
        str(tmp_path),
        ASCEND_CLOUD_API_KEY="abc123",
        HCCL_CONNECT_TIMEOUT="900",
        UNRELATED="x",
    )
    variables = snapshot["env"]["vars"]
    assert variables["ASCEND_CLOUD_API_KEY"] == "<redacted>"
    assert variables["HCCL_CONNECT_TIMEOUT"] == "900"
    assert "UNRELATED" not in variables
    assert "abc123" not in json.dumps(snapshot)


def test_the_collector_runs_on_python_3_8(tmp_path: Path) -> None:
    interpreter = python38()
    if interpreter is None:
        pytest.skip("no Python 3.8 on this machine")
    snapshot = run_collector(
        "--ascend-root",
        str(build_ascend_tree(tmp_path)),
        "--npu-smi-output",
        str(ALARM),
        python=interpreter,
    )
    assert snapshot["python"]["version"].startswith("3.8.")
    assert "chip-health" in ids(snapshot["findings"])


# -- the doctor, on snapshots built to show one problem each ------------------


def base_snapshot(tmp_path: Path) -> dict:
    return collect(
        ascend_root=str(build_ascend_tree(tmp_path)),
        etc_dir=str(tmp_path),
        npu_smi_output=str(A2_8CARD),
        probe_torch_npu=False,
    )


def only(findings: list[dict], ident: str) -> dict:
    matching = [finding for finding in findings if finding["id"] == ident]
    assert len(matching) == 1, ids(findings)
    return matching[0]


def test_unhealthy_chips(tmp_path: Path) -> None:
    snapshot = collect(npu_smi_output=str(ALARM), probe_torch_npu=False)
    found = only(snapshot["findings"], "chip-health")
    assert found["severity"] == "error"
    assert found["evidence"] == "NPU 0 chip 0: Alarm"


def test_visible_devices_that_hide_cards(tmp_path: Path) -> None:
    snapshot = base_snapshot(tmp_path)
    snapshot["env"]["vars"]["ASCEND_RT_VISIBLE_DEVICES"] = "0,1"
    found = only(diagnose(snapshot), "visible-devices-hide-cards")
    assert found["evidence"] == "ASCEND_RT_VISIBLE_DEVICES='0,1' exposes 2 of 8 chips"


def test_a_dangling_latest_link(tmp_path: Path) -> None:
    root = build_ascend_tree(tmp_path / "Ascend")
    (root / "ascend-toolkit/latest").unlink()
    (root / "ascend-toolkit/latest").symlink_to("8.0.RC9")
    snapshot = collect(ascend_root=str(root), etc_dir=str(tmp_path), probe_torch_npu=False)
    found = only(snapshot["findings"], "latest-link-dangling")
    assert found["evidence"].endswith("ascend-toolkit/latest -> 8.0.RC9")


def test_torch_npu_that_cannot_load_cann_says_to_source_set_env(tmp_path: Path) -> None:
    snapshot = base_snapshot(tmp_path)
    snapshot["python"]["key"]["torch-npu"] = "2.5.1"
    snapshot["python"]["torch_npu_import"] = {
        "ok": False,
        "error": "ImportError: libhccl.so: cannot open shared object file: No such file",
    }
    found = only(diagnose(snapshot), "torch-npu-import")
    assert found["severity"] == "error"
    assert "source the CANN set_env.sh" in found["fix"]


def test_a_torch_pair_that_was_never_released(tmp_path: Path) -> None:
    snapshot = base_snapshot(tmp_path)
    snapshot["python"]["key"].update({"torch": "2.4.0", "torch-npu": "2.1.0.post8"})
    found = only(diagnose(snapshot), "torch-pair")
    assert found["severity"] == "error"
    assert "torch_npu 2.1.0.post8 is released for torch 2.1.0, not 2.4.0" in found["evidence"]
    assert found["fix"].startswith("torch_npu 2.1.0.post8 is released for torch 2.1.0, CANN ")


def test_an_incompatible_driver_and_firmware(tmp_path: Path) -> None:
    snapshot = base_snapshot(tmp_path)
    snapshot["ascend"]["compatibility"][0]["verdict"] = "incompatible"
    found = only(diagnose(snapshot), "stack-incompatible")
    assert found["title"] == "incompatible: driver 25.0.rc1.1 ↔ firmware 7.7.0.1.231"


def test_a_check_that_breaks_becomes_a_finding(tmp_path: Path) -> None:
    snapshot = base_snapshot(tmp_path)
    snapshot["npu"]["chips"] = 8  # not a list of chips
    assert "doctor-chip_health" in ids(diagnose(snapshot))
