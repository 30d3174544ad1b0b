"""The doctor: findings about a snapshot, each with a severity, the evidence and the fix.

Runs on the host, right after collection (``python -m workers.collect``):
it reads only the snapshot document, so the platform can run it again on a
stored snapshot. Standard library only.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from workers.contract.compat import INCOMPATIBLE, UNKNOWN, check_python_stack, current_cann_version

SET_ENV_FIX = (
    "source the CANN set_env.sh (e.g. /usr/local/Ascend/ascend-toolkit/set_env.sh) in the shell "
    "that starts the worker, or add it to the worker's service"
)


def finding(ident: str, severity: str, title: str, evidence: str, fix: str) -> dict[str, Any]:
    return {"id": ident, "severity": severity, "title": title, "evidence": evidence, "fix": fix}


def diagnose(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    """Every finding about ``snapshot``; a check that breaks becomes a finding itself."""
    findings: list[dict[str, Any]] = []
    for check in CHECKS:
        try:
            findings.extend(check(snapshot))
        except Exception as exc:  # the doctor must never lose the snapshot
            findings.append(
                finding(
                    f"doctor-{check.__name__}",
                    "warning",
                    f"the {check.__name__} check could not run",
                    f"{type(exc).__name__}: {exc}",
                    "report this as a bug in npulab's collector",
                )
            )
    return findings


def _section(snapshot: dict[str, Any], name: str) -> dict[str, Any]:
    section = snapshot.get(name)
    return section if isinstance(section, dict) else {}


def section_errors(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        finding(
            f"{name}-unreadable",
            "warning",
            f"the {name} section could not be collected",
            str(_section(snapshot, name)["error"]),
            "see the evidence; the rest of the snapshot is still valid",
        )
        for name in ("host", "npu", "ascend", "python", "env", "cuda")
        if "error" in _section(snapshot, name)
    ]


def npu_smi(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    npu = _section(snapshot, "npu")
    if npu.get("present") is False:
        return [
            finding(
                "npu-smi-missing",
                "info",
                "no npu-smi on this host",
                "npu-smi is not on PATH: no Ascend driver here, or PATH lacks it",
                "nothing to do on a CPU or GPU host; on an NPU host install the driver "
                "or add /usr/local/sbin to PATH",
            )
        ]
    if npu.get("info_error"):
        return [
            finding(
                "npu-smi-failed",
                "error",
                "npu-smi cannot read the devices",
                str(npu["info_error"]),
                "in a container, pass the /dev/davinci* devices, /dev/davinci_manager, "
                "/dev/devmm_svm, /dev/hisi_hdc and the driver directory; on the host, check "
                "that no other process holds the devices and the driver is loaded",
            )
        ]
    return []


def chip_health(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    bad = [
        chip
        for chip in _section(snapshot, "npu").get("chips") or []
        if isinstance(chip, dict) and chip.get("health") not in (None, "OK")
    ]
    if not bad:
        return []
    severity = "error" if any(c.get("health") in ("Alarm", "Critical") for c in bad) else "warning"
    evidence = ", ".join(f"NPU {c.get('npu')} chip {c.get('chip')}: {c.get('health')}" for c in bad)
    return [
        finding(
            "chip-health",
            severity,
            f"{len(bad)} chip(s) not healthy",
            evidence,
            "run `npu-smi info -t health -i <npu>` for the alarm codes; drain the host "
            "before the cards are replaced or reset",
        )
    ]


def chip_identity(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    uncertain = [
        ident
        for ident in _section(snapshot, "npu").get("identity") or []
        if isinstance(ident, dict) and not ident.get("certain")
    ]
    if not uncertain:
        return []
    first = uncertain[0]
    return [
        finding(
            "chip-generation-uncertain",
            "info",
            f"chip generation uncertain for {len(uncertain)} chip(s)",
            f"{first.get('name')}: {first.get('evidence')}",
            "check `npu-smi info -m`, `npu-smi info -t board -i <npu>` or "
            "torch_npu.npu.get_soc_version() before relying on A2 performance",
        )
    ]


def tool_versus_driver(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    tool = _section(snapshot, "npu").get("tool_version")
    driver = (_section(snapshot, "ascend").get("driver") or {}).get("version")
    if not tool or not driver or str(tool).lower() == str(driver).lower():
        return []
    return [
        finding(
            "npu-smi-driver-mismatch",
            "warning",
            "npu-smi and the driver differ in version",
            f"npu-smi {tool}, driver/version.info {driver}",
            "npu-smi ships with the driver: a mismatch means a partial upgrade or a second "
            "driver install; reinstall the driver package that belongs to the firmware",
        )
    ]


def visible_devices(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    env = _section(snapshot, "env").get("vars") or {}
    value = env.get("ASCEND_RT_VISIBLE_DEVICES")
    chips = [c for c in _section(snapshot, "npu").get("chips") or [] if isinstance(c, dict)]
    if value is None or not chips:
        return []
    # torch_npu reads the comma-separated integer prefix and stops at anything else.
    visible = re.match(r"^[\d,]*", value).group(0)
    ids = [part for part in visible.split(",") if part != ""]
    if len(ids) >= len(chips):
        return []
    return [
        finding(
            "visible-devices-hide-cards",
            "warning",
            "ASCEND_RT_VISIBLE_DEVICES hides cards npu-smi shows",
            f"ASCEND_RT_VISIBLE_DEVICES={value!r} exposes {len(ids)} of {len(chips)} chips",
            "unset it in the worker's environment: the host worker sets it per run from "
            "the devices the run leased",
        )
    ]


def latest_links(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    cann = _section(snapshot, "ascend").get("cann") or {}
    dangling = [link for link in cann.get("links") or [] if link.get("dangling")]
    return [
        finding(
            "latest-link-dangling",
            "error",
            "a CANN `latest` link points nowhere",
            f"{link.get('path')} -> {_link_target(link)}",
            "reinstall the CANN package, or point the link at an installed version "
            "(an uninstall removed its target)",
        )
        for link in dangling
    ]


def _link_target(link: dict[str, Any]) -> str:
    # A `latest` folder of per-component links names the links that broke.
    return str(link.get("target") or ", ".join(link.get("dangling_links") or []))


def driver_stack(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    pairs = _section(snapshot, "ascend").get("compatibility") or []
    return [
        finding(
            "stack-incompatible",
            "error",
            f"incompatible: {pair.get('pair')}",
            str(pair.get("reason")),
            "install the driver, firmware and CANN versions of one release "
            "(the HDK and CANN release notes list the matching set)",
        )
        for pair in pairs
        if isinstance(pair, dict) and pair.get("verdict") == INCOMPATIBLE
    ]


def torch_npu_import(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    probe = _section(snapshot, "python").get("torch_npu_import")
    if not isinstance(probe, dict) or probe.get("ok"):
        return []
    error = str(probe.get("error") or "")
    if "cannot open shared object file" in error or "ERR00008" in error:
        fix = SET_ENV_FIX
    else:
        fix = "install the torch_npu build that matches this torch and CANN (see the pair findings)"
    return [finding("torch-npu-import", "error", "import torch_npu fails", error, fix)]


def torch_pair(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    python = _section(snapshot, "python")
    key = python.get("key") or {}
    if not key.get("torch-npu"):
        return []
    cann = current_cann_version(_section(snapshot, "ascend").get("cann") or {})
    result = check_python_stack(key.get("torch"), key.get("torch-npu"), cann, python.get("version"))
    if result["verdict"] == INCOMPATIBLE:
        severity, title = (
            "error",
            "torch, torch_npu, CANN and Python do not match the released pairs",
        )
    elif result["verdict"] == UNKNOWN:
        severity, title = (
            "info",
            "the torch_npu compatibility table cannot vouch for this combination",
        )
    else:
        return []
    required = result.get("required") or {}
    fix = (
        f"torch_npu {required['torch_npu']} is released for torch {required['torch']}, "
        f"CANN {', '.join(required['cann'])}, "
        f"Python {required['python_min']}-{required['python_max']}"
        if required
        else "use a torch / torch_npu pair from the Ascend/pytorch compatibility table"
    )
    return [finding("torch-pair", severity, title, "; ".join(result["reasons"]), fix)]


CHECKS: list[Callable[[dict[str, Any]], list[dict[str, Any]]]] = [
    section_errors,
    npu_smi,
    chip_health,
    chip_identity,
    tool_versus_driver,
    visible_devices,
    latest_links,
    driver_stack,
    torch_npu_import,
    torch_pair,
]
