"""Compatibility verdicts for a stored snapshot or a planned version set.

The rules live in workers.contract.compat (shared with the collector's doctor);
running them here again means a stored snapshot is always judged by the
current rules and table.
"""

from __future__ import annotations

from typing import Any

from workers.contract.compat import (
    INCOMPATIBLE,
    OK,
    UNKNOWN,
    check_python_stack,
    check_stack,
    current_cann_version,
    pair_verdicts,
    required_for,
)
from workers.contract.compat_mindspore import check_mindspore_stack

NOT_APPLICABLE = "n/a"


def worst(verdicts: list[str]) -> str:
    if INCOMPATIBLE in verdicts:
        return INCOMPATIBLE
    if UNKNOWN in verdicts:
        return UNKNOWN
    return OK if verdicts else NOT_APPLICABLE


def snapshot_compatibility(data: dict[str, Any]) -> dict[str, Any]:
    """Driver ↔ firmware ↔ CANN pairs, the torch / torch_npu / CANN / Python set and
    MindSpore / CANN / Python."""
    ascend = data.get("ascend") or {}
    cann = ascend.get("cann") or {}
    stack = pair_verdicts(
        check_stack(ascend.get("driver") or {}, ascend.get("firmware") or {}, cann)
    )
    python = data.get("python") or {}
    key = python.get("key") or {}
    python_stack = None
    if key.get("torch-npu"):
        python_stack = check_python_stack(
            key.get("torch"),
            key.get("torch-npu"),
            current_cann_version(cann),
            python.get("version"),
        )
    mindspore_stack = None
    if key.get("mindspore"):
        mindspore_stack = check_mindspore_stack(
            key.get("mindspore"), current_cann_version(cann), python.get("version")
        )
    verdicts = [pair["verdict"] for pair in stack]
    for checked in (python_stack, mindspore_stack):
        if checked is not None:
            verdicts.append(checked["verdict"])
    return {
        "verdict": worst(verdicts),
        "stack": stack,
        "python_stack": python_stack,
        "mindspore_stack": mindspore_stack,
    }


def planned_compatibility(current: dict[str, Any], planned: dict[str, str]) -> dict[str, Any]:
    """What the table says of moving ``current`` to the ``planned`` versions.

    Versions the plan leaves out are taken from the current snapshot, except
    torch, which follows the planned torch_npu's release. The driver cannot
    be checked against a CANN that is not installed yet (its list names CANN
    inner versions, which only the installed package carries): that part
    stays unknown, with the driver's list shown.
    """
    python = current.get("python") or {}
    key = python.get("key") or {}
    cann_section = (current.get("ascend") or {}).get("cann") or {}
    rows = required_for(
        cann=planned.get("cann") or None,
        torch_npu=planned.get("torch_npu") or None,
        torch=planned.get("torch") or None,
    )
    chosen = rows[0] if rows else {}
    target = {
        "cann": planned.get("cann") or current_cann_version(cann_section),
        "torch_npu": chosen.get("torch_npu") or planned.get("torch_npu") or key.get("torch-npu"),
        "torch": planned.get("torch") or chosen.get("torch") or key.get("torch"),
        "python": planned.get("python") or python.get("version"),
    }
    python_stack = check_python_stack(
        target["torch"], target["torch_npu"], target["cann"], target["python"]
    )
    driver = (current.get("ascend") or {}).get("driver") or {}
    driver_note = {
        "verdict": UNKNOWN,
        "reason": (
            f"driver {driver.get('version') or '(not installed)'} accepts CANN inner versions "
            f"{_listed(driver.get('accepts_cann'))}; the planned "
            "CANN's inner version is known only once installed: check the CANN release notes "
            "for its driver, then take a snapshot"
        ),
    }
    return {
        "verdict": worst([python_stack["verdict"], UNKNOWN]),
        "target": target,
        "required": rows,
        "python_stack": python_stack,
        "driver": driver_note,
    }


def _listed(items: Any) -> str:
    """ "V100R001C17, V100R001C13-V100R001C19": single versions and [low, high] ranges."""
    rendered = [item if isinstance(item, str) else f"{item[0]}-{item[1]}" for item in items or []]
    return ", ".join(rendered) or "(none listed)"
