"""The views torch_npu's profiler computes itself, read from its ASCEND_PROFILER_OUTPUT files.

- ``kernel_details.csv``: device time by op type and by core (AI Core, AI Vector Core,
  AI CPU, the mixed ones), read row by row;
- ``op_statistic.csv``: the profiler's own per-op-type table;
- ``step_trace_time.csv``: per step, computing / communication (not overlapped) /
  overlapped / free time, hence the communication share;
- ``communication.json``: per collective, elapse / transit / wait time and bandwidth.

Column names are the exact header strings torch_npu writes (see
tests/fixtures/ascend/profiler/README.md); a file that is absent or lacks its key
columns is skipped and named in ``missing``. Times in the result are microseconds.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

from npulab.core.text import error_text

TOP = 15
MAX_TYPES = 5000
# communication.json is read whole: beyond this it is skipped rather than risk the memory.
MAX_COMMUNICATION_BYTES = 64 << 20

AI_CORE = ("AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV", "AIC", "AIV")
AI_CPU = ("AI_CPU", "AICPU")


def _number(value: Any) -> float | None:
    if value is None:
        return None
    text = str(value).strip().rstrip("\t")
    if not text or text in ("N/A", "NA", "-"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _rows(path: Path) -> Any:
    with open(path, newline="", encoding="utf-8-sig", errors="replace") as stream:
        reader = csv.reader(stream)
        header = next(reader, None)
        if header is None:
            return
        names = [h.strip() for h in header]
        for row in reader:
            yield dict(zip(names, row, strict=False))


def core_group(core: str) -> str:
    """AI Core / AI CPU / communication / the core's own name."""
    upper = core.strip().upper()
    if upper in AI_CORE:
        return "AI Core"
    if upper in AI_CPU:
        return "AI CPU"
    if "HCCL" in upper or "COMMUNICATION" in upper:
        return "Communication"
    return core.strip() or "Unknown"


def kernel_details(path: Path) -> dict[str, Any] | None:
    by_type: dict[str, list[float]] = {}
    by_core: dict[str, list[float]] = {}
    total = 0.0
    rows = 0
    for row in _rows(path):
        dur = _number(row.get("Duration(us)"))
        if dur is None:
            continue
        rows += 1
        total += dur
        kind = (row.get("Type") or "").strip() or "Unknown"
        if kind not in by_type and len(by_type) >= MAX_TYPES:
            kind = "(other types)"
        cell = by_type.setdefault(kind, [0, 0.0])
        cell[0] += 1
        cell[1] += dur
        group = core_group(row.get("Accelerator Core") or "")
        cell = by_core.setdefault(group, [0, 0.0])
        cell[0] += 1
        cell[1] += dur
    if not rows:
        return None

    def table(cells: dict[str, list[float]], key: str) -> list[dict[str, Any]]:
        out = [
            {key: k, "count": int(c), "us": us, "pct": round(100 * us / total, 2) if total else 0.0}
            for k, (c, us) in cells.items()
        ]
        out.sort(key=lambda r: (-r["us"], r[key]))
        return out

    return {
        "kernels": rows,
        "us": total,
        "by_type": table(by_type, "type")[:TOP],
        "by_core": table(by_core, "core"),
    }


def op_statistic(path: Path) -> list[dict[str, Any]] | None:
    out = []
    for row in _rows(path):
        us = _number(row.get("Total Time(us)"))
        if us is None:
            continue
        out.append(
            {
                "type": (row.get("OP Type") or "").strip(),
                "core": (row.get("Core Type") or "").strip(),
                "count": int(_number(row.get("Count")) or 0),
                "us": us,
                "avg_us": _number(row.get("Avg Time(us)")),
                "max_us": _number(row.get("Max Time(us)")),
                "pct": _number(row.get("Ratio(%)")),
            }
        )
        if len(out) > MAX_TYPES:
            break
    if not out:
        return None
    out.sort(key=lambda r: (-r["us"], r["type"]))
    return out[:TOP]


STEP_COLUMNS = {
    "computing_us": "Computing",
    "communication_not_overlapped_us": "Communication(Not Overlapped)",
    "overlapped_us": "Overlapped",
    "communication_us": "Communication",
    "free_us": "Free",
    "stage_us": "Stage",
    "bubble_us": "Bubble",
    "preparing_us": "Preparing",
}


def step_trace_time(path: Path) -> dict[str, Any] | None:
    steps = []
    totals = dict.fromkeys(STEP_COLUMNS, 0.0)
    for row in _rows(path):
        item: dict[str, Any] = {
            "step": (row.get("Step") or "").strip(),
            "device": (row.get("Device_id") or "").strip(),
        }
        for key, column in STEP_COLUMNS.items():
            value = _number(row.get(column))
            item[key] = value
            if value is not None:
                totals[key] += value
        if item["computing_us"] is None and item["free_us"] is None:
            continue
        steps.append(item)
    if not steps:
        return None
    # The step's wall time as torch_npu splits it: computing + exposed communication + free.
    wall = totals["computing_us"] + totals["communication_not_overlapped_us"] + totals["free_us"]
    return {
        "steps": steps[:200],
        "count": len(steps),
        "totals": totals,
        "communication_pct": round(100 * totals["communication_not_overlapped_us"] / wall, 2)
        if wall
        else None,
        "free_pct": round(100 * totals["free_us"] / wall, 2) if wall else None,
        "computing_pct": round(100 * totals["computing_us"] / wall, 2) if wall else None,
    }


def communication(path: Path) -> dict[str, Any] | None:
    if os.path.getsize(path) > MAX_COMMUNICATION_BYTES:
        return {"skipped": f"communication.json is over {MAX_COMMUNICATION_BYTES >> 20} MB"}
    try:
        with open(path, encoding="utf-8") as stream:
            data = json.load(stream)
    except (OSError, ValueError) as exc:
        return {"error": f"communication.json unreadable: {error_text(exc)}"}
    if not isinstance(data, dict):
        return None
    ops: dict[str, list[float]] = {}  # op type -> [count, elapse, transit, wait, sync]
    for step in data.values():
        if not isinstance(step, dict):
            continue
        for group in ("collective", "p2p"):
            for name, info in (step.get(group) or {}).items():
                if not isinstance(info, dict) or "Total Op Info" in name:
                    continue
                times = info.get("Communication Time Info") or {}
                kind = _op_type(name)
                cell = ops.setdefault(kind, [0, 0.0, 0.0, 0.0, 0.0])
                cell[0] += 1
                for i, key in enumerate(
                    (
                        "Elapse Time(ms)",
                        "Transit Time(ms)",
                        "Wait Time(ms)",
                        "Synchronization Time(ms)",
                    ),
                    start=1,
                ):
                    cell[i] += 1000 * (_number(times.get(key)) or 0.0)
    if not ops:
        return None
    rows = [
        {"op": k, "count": int(c), "elapse_us": e, "transit_us": t, "wait_us": w, "sync_us": s}
        for k, (c, e, t, w, s) in ops.items()
    ]
    rows.sort(key=lambda r: (-r["elapse_us"], r["op"]))
    elapse = sum(r["elapse_us"] for r in rows)
    wait = sum(r["wait_us"] for r in rows)
    return {
        "ops": rows[:TOP],
        "elapse_us": elapse,
        "wait_pct": round(100 * wait / elapse, 2) if elapse else None,
    }


def _op_type(name: str) -> str:
    # "hcom_allReduce__661_0_1@123" -> "allReduce"
    if "hcom_" in name:
        return name.split("hcom_", 1)[1].split("_", 1)[0] or name
    return name.split("_", 1)[0] or name


FILES = {
    "kernel_details": ("kernel_details.csv", kernel_details),
    "op_statistic": ("op_statistic.csv", op_statistic),
    "step_trace_time": ("step_trace_time.csv", step_trace_time),
    "communication": ("communication.json", communication),
}


def npu_views(output_dir: str | Path) -> dict[str, Any]:
    """Every view the folder has the files for; ``missing`` names the rest."""
    folder = Path(output_dir)
    result: dict[str, Any] = {"folder": folder.parent.name, "missing": []}
    for key, (filename, reader) in FILES.items():
        path = folder / filename
        if not path.is_file():
            result["missing"].append(filename)
            continue
        try:
            value = reader(path)
        except (OSError, csv.Error, UnicodeError) as exc:
            value = {"error": f"{filename} unreadable: {error_text(exc)}"}
        if value is None:
            result["missing"].append(filename)
        else:
            result[key] = value
    return result
