"""msprobe's comparison rows, judged by npulab's thresholds; loss curves side by side.

msprobe writes one row per tensor (each input, output and parameter gradient of a layer's
forward or backward call) with its own ``Result``, which is no verdict (cosine 0.33 can
still pass). Here each row becomes a layer row with the numbers the API shows, the
thresholds it breaks, and the call site of the script that ran it. Standard library only.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

# msprobe's column names (msprobe.core.common.const.CompareConst).
NAME_B, NAME_A = "NPU Name", "Bench Name"
DTYPE_B, DTYPE_A = "NPU Dtype", "Bench Dtype"
SHAPE_B, SHAPE_A = "NPU Tensor Shape", "Bench Tensor Shape"
COSINE = "Cosine"
EUC_DIST = "EucDist"
MAX_ABS_ERR = "MaxAbsErr"
MAX_REL_ERR = "MaxRelativeErr"
ONE_THOUSANDTH = "One Thousandth Err Ratio"
FIVE_THOUSANDTHS = "Five Thousandths Err Ratio"
ERROR_MESSAGE = "Err_message"
# Statistics-only rows (a dump beyond max_dump_mb): the statistics' differences.
MAX_DIFF = "Max diff"
NORM_REL_ERR = "NormRelativeErr"

# Thresholds a row can break, as the API and the page name them.
BROKE_COSINE = "cosine"
BROKE_MAX_REL_ERR = "max_rel_err"
BROKE_THOUSANDTH = "thousandth_ratio"
BROKE_NAN = "nan"
BROKE_SHAPE = "shape"
BROKE_MISSING = "missing"

# Frames of these never are the script's call site.
_LIBRARY_PARTS = ("site-packages", "dist-packages", "/torch/", "/msprobe/", "/workers/parity/")


def number(value: Any) -> float | None:
    """A cell as a float: None for empty or N/A; NaN/inf kept (they are findings).
    Statistics-mode relative errors are written as percentages ("12.5%")."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    scale = 1.0
    if text.endswith("%"):
        text, scale = text[:-1], 0.01
    try:
        return float(text) * scale
    except ValueError:
        return None


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def judge(
    cells: dict[str, Any], thresholds: dict[str, float], statistics: bool = False
) -> dict[str, Any]:
    """One msprobe row as a layer row: its numbers (non-finite ones as None, with ``nan``
    set) and the thresholds it breaks, in the order cosine, max_rel_err, thousandth ratio."""
    raw = {
        "cosine": number(cells.get(COSINE)),
        "euc_dist": number(cells.get(EUC_DIST)),
        "max_abs_err": number(cells.get(MAX_DIFF if statistics else MAX_ABS_ERR)),
        "max_rel_err": number(cells.get(MAX_REL_ERR)),
        "one_thousandth_ratio": number(cells.get(ONE_THOUSANDTH)),
        "five_thousandth_ratio": number(cells.get(FIVE_THOUSANDTHS)),
    }
    if statistics and raw["max_abs_err"] is not None:
        raw["max_abs_err"] = abs(raw["max_abs_err"])
    shape_a, shape_b = str(cells.get(SHAPE_A, "")), str(cells.get(SHAPE_B, ""))
    name_a = str(cells.get(NAME_A) or "")
    nan = any(value is not None and not math.isfinite(value) for value in raw.values())
    nan = nan or "nan" in str(cells.get(ERROR_MESSAGE, "")).lower()
    broken = []
    if not name_a or name_a.upper() == "N/A":
        broken.append(BROKE_MISSING)
    elif shape_a != shape_b:
        broken.append(BROKE_SHAPE)
    if nan:
        broken.append(BROKE_NAN)
    cosine, max_rel = _finite(raw["cosine"]), _finite(raw["max_rel_err"])
    ratio = _finite(raw["one_thousandth_ratio"])
    if cosine is not None and cosine < thresholds["cosine_min"]:
        broken.append(BROKE_COSINE)
    if max_rel is not None and max_rel > thresholds["max_rel_err"]:
        broken.append(BROKE_MAX_REL_ERR)
    if ratio is not None and ratio < thresholds["thousandth_ratio_min"]:
        broken.append(BROKE_THOUSANDTH)
    row = {key: _finite(value) for key, value in raw.items()}
    row.update(
        name=str(cells.get(NAME_B) or name_a),
        dtype_a=str(cells.get(DTYPE_A) or ""),
        dtype_b=str(cells.get(DTYPE_B) or ""),
        shape_a=shape_a,
        shape_b=shape_b,
        nan=nan,
        broken=broken,
    )
    return row


def script_frames(stack: Any, script: str = "") -> list[str]:
    """The frames of a layer's stack that are the user's code, innermost first: those in
    ``script`` when it is named, else every frame outside the libraries."""
    if isinstance(stack, str):
        frames = [line.strip() for line in stack.splitlines() if line.strip()]
    elif isinstance(stack, (list, tuple)):
        frames = [str(frame).strip() for frame in stack if str(frame).strip()]
    else:
        return []
    if script:
        mine = [frame for frame in frames if script in frame]
        if mine:
            return mine
    return [frame for frame in frames if not any(part in frame for part in _LIBRARY_PARTS)]


def stack_of(stacks: dict[str, list[str]], name: str) -> list[str]:
    """The call stack of a row: its call's, the longest prefix of its name that msprobe
    has a stack for (``Functional.linear.1.forward`` of ``...forward.input.1``,
    ``Module.second.Linear.forward.0`` of ``...forward.0.parameters.weight``); a backward
    row has its forward call's."""
    parts = name.split(".")
    for count in range(len(parts), 0, -1):
        key = ".".join(parts[:count])
        for candidate in (key, key.replace(".backward", ".forward")):
            if candidate in stacks:
                return stacks[candidate]
    return []


def first_divergent(rows: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The first row, in execution order, that breaks a threshold."""
    for row in rows:
        if row["broken"]:
            return row
    return None
