"""Columns of the store as Python values, for callers that want numbers, not arrays.

The store reads points and blocks into numpy arrays (npulab.series.chunks,
npulab.series.rollups); NaN in a float column means "no value" (a NaN or infinite value is
stored as none), which orjson writes as ``null`` and Python callers get as None.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def as_python(values: np.ndarray) -> list[Any]:
    """``values`` as a list of Python numbers, NaN as None (for callers in Python)."""
    listed = values.tolist()
    if values.dtype.kind == "f":
        for index in np.flatnonzero(np.isnan(values)).tolist():
            listed[index] = None
    return listed
