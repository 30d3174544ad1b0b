"""Planned versions nobody knows: a typo or a release newer than the table should say so.

A planned version is known when a compatibility source names it: the
torch_npu table (workers/contract/data/compat-torch_npu.csv) or the current
snapshot, which has it installed. For one that is not, the review names the
known versions on either side of it, so the user sees what was probably meant.
"""

from __future__ import annotations

import difflib
import functools
import re
from typing import Any

from workers.contract.compat import compare_versions, load_table, required_for, version_key

# Planned field -> how a person names it.
LABELS = {"cann": "CANN", "torch_npu": "torch_npu", "torch": "torch", "python": "Python"}
NEAREST = 2
_MINOR = re.compile(r"^\s*(\d+)\.(\d+)")


def unknown_versions(planned: dict[str, str], current: dict[str, Any]) -> list[dict[str, Any]]:
    """Each planned version no source knows: field, label, version and the nearest known.

    ``current`` is the current snapshot's stack (npulab.snapshots.stack).
    """
    found = []
    for field, version in planned.items():
        if field not in LABELS or not version:
            continue
        installed = current.get(field)
        known = known_versions(field)
        if installed and field == "python":
            installed = _minor_text(installed)
        if installed:
            known = sorted({*known, installed}, key=functools.cmp_to_key(_compare))
        if _is_known(field, version, known):
            continue
        found.append(
            {
                "field": field,
                "label": LABELS[field],
                "version": version,
                "nearest": nearest(version, known),
            }
        )
    return found


def describe(unknown: dict[str, Any]) -> str:
    """ "CANN 8.9.RC9 is an unknown version: no compatibility source knows it (nearest known:
    8.3.RC1, 8.5.0)"."""
    nearest_known = ", ".join(unknown["nearest"]) or "none"
    return (
        f"{unknown['label']} {unknown['version']} is an unknown version: no compatibility "
        f"source knows it (nearest known: {nearest_known})"
    )


@functools.cache
def _known(field: str) -> tuple[str, ...]:
    rows = load_table()
    if field == "python":
        minors = set()
        for row in rows:
            low, high = _minor(row["python_min"] or ""), _minor(row["python_max"] or "")
            if low and high and low[0] == high[0]:
                minors.update((low[0], minor) for minor in range(low[1], high[1] + 1))
        return tuple(f"{major}.{minor}" for major, minor in sorted(minors))
    values = {row[field] for row in rows if row[field]}
    return tuple(sorted(values, key=functools.cmp_to_key(_compare)))


def known_versions(field: str) -> list[str]:
    """The versions of ``field`` the table names, in version order (Python: major.minor)."""
    return list(_known(field))


def nearest(version: str, known: list[str]) -> list[str]:
    """The known versions just below and just above ``version`` (up to two each side); for
    text that is no version, the most alike."""
    try:
        key = version_key(version)
    except ValueError:
        return difflib.get_close_matches(version, known, n=NEAREST * 2, cutoff=0)
    below = [each for each in known if _key(each) < key]
    above = [each for each in known if _key(each) > key]
    return below[-NEAREST:] + above[:NEAREST]


def _is_known(field: str, version: str, known: list[str]) -> bool:
    if field == "python":
        return _minor_text(version) in known
    # A bare torch_npu release (2.6.0) names its line (2.6.0.post3), as the review reads it.
    return bool(required_for(**{field: version})) or any(_equal(version, k) for k in known)


def _minor(text: str) -> tuple[int, int] | None:
    match = _MINOR.match(text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _minor_text(text: str) -> str | None:
    """ "3.11" of "3.11.4": the Python release line the table speaks of."""
    parsed = _minor(text)
    return f"{parsed[0]}.{parsed[1]}" if parsed else None


def _key(version: str) -> tuple:
    try:
        return version_key(version)
    except ValueError:
        return ()


def _compare(a: str, b: str) -> int:
    try:
        return compare_versions(a, b)
    except ValueError:
        return (a > b) - (a < b)


def _equal(a: str, b: str) -> bool:
    return _compare(a, b) == 0
