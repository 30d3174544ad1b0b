"""MindSpore with the installed CANN and Python: verdicts from ``data/compat-mindspore.csv``.

The table (``data/README.md`` names its sources) pairs each MindSpore release with
its CANN and, where a source gives one, its Python range. The verdicts read like
torch_npu's (``workers.contract.compat``): ``ok`` when the table says so,
``incompatible`` when it contradicts a value, ``unknown`` when it cannot speak (a
release it does not list, no Python range published). Without CANN (a CPU or GPU
host) there is nothing to pair MindSpore with, and only Python is checked.
Standard library only, Python 3.8.
"""

from __future__ import annotations

import csv
import functools
import os
from typing import Any

from workers.contract.compat import INCOMPATIBLE, OK, UNKNOWN, _python_version, _same

TABLE_PATH = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "data", "compat-mindspore.csv"
)


@functools.lru_cache(maxsize=1)
def _table() -> tuple[dict[str, str | None], ...]:
    with open(TABLE_PATH, encoding="utf-8", newline="") as handle:
        return tuple(
            {key: (value.strip() or None) for key, value in row.items()}
            for row in csv.DictReader(handle)
        )


def load_table() -> list[dict[str, str | None]]:
    """The rows: mindspore, cann, python_min, python_max, source (blank cells are None)."""
    return [dict(row) for row in _table()]


def check_mindspore_stack(
    mindspore: str | None, cann: str | None, python: str | None
) -> dict[str, Any]:
    """The verdict on MindSpore with this CANN (None: none installed) and Python."""
    rows = [row for row in _table() if mindspore and _same(row["mindspore"] or "", mindspore)]
    notes: list[tuple[str, str]] = []
    if not mindspore:
        notes.append((UNKNOWN, "MindSpore not given: no release to look up"))
    elif not rows:
        notes.append((UNKNOWN, f"MindSpore {mindspore} is not in the table"))
    else:
        if cann:
            notes.append(_check_cann(mindspore, cann, rows))
        notes.append(_check_python(mindspore, python, rows))
    verdicts = {verdict for verdict, _ in notes}
    verdict = INCOMPATIBLE if INCOMPATIBLE in verdicts else UNKNOWN if UNKNOWN in verdicts else OK
    return {
        "verdict": verdict,
        "reasons": [reason for _, reason in notes],
        "checks": [{"verdict": each, "reason": reason} for each, reason in notes],
        "sources": sorted({row["source"] or "" for row in rows} - {""}),
    }


def _check_cann(mindspore: str, cann: str, rows: list[dict[str, str | None]]) -> tuple[str, str]:
    paired = [row["cann"] for row in rows if row["cann"]]
    if not paired:
        return UNKNOWN, f"no CANN pairing is published for MindSpore {mindspore}"
    if any(_same(version or "", cann) for version in paired):
        return OK, f"MindSpore {mindspore} is released for CANN {cann}"
    return INCOMPATIBLE, (
        f"MindSpore {mindspore} is released for CANN {', '.join(map(str, paired))}, not {cann}"
    )


def _check_python(
    mindspore: str, python: str | None, rows: list[dict[str, str | None]]
) -> tuple[str, str]:
    if not python:
        return UNKNOWN, "Python not given"
    parsed = _python_version(python)
    if parsed is None:
        return UNKNOWN, f"cannot read Python version {python!r}"
    ranges = [
        (_python_version(row["python_min"]), _python_version(row["python_max"]))
        for row in rows
        if row["python_min"] and row["python_max"]
    ]
    ranges = [(low, high) for low, high in ranges if low and high]
    shown = f"{parsed[0]}.{parsed[1]}"
    if not ranges:
        return UNKNOWN, f"no Python range is published for MindSpore {mindspore}"
    low, high = ranges[0]
    span = f"{low[0]}.{low[1]} to {high[0]}.{high[1]}"
    if low <= parsed <= high:
        return OK, f"Python {shown} is within {span} for MindSpore {mindspore}"
    return INCOMPATIBLE, f"Python {shown} is outside {span} for MindSpore {mindspore}"
