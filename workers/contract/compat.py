"""Is the installed Ascend stack compatible? Decided offline, from files only.

a) Driver, firmware and CANN, the way ``ascend-dmi -c`` reads the version
files: the driver's ``compatible_version`` lists CANN inner version prefixes
(``V100R001C19`` accepts ``V100R001C19SPC001B123``) and its
``compatible_version_fw`` firmware ranges; the firmware's
``compatible_version_drv`` lists driver ranges; a CANN package's install info
lists in ``compatible_version`` the driver inner versions it accepts (single
prefixes or ``[low,high]`` ranges compared by their V/R/C numbers).
``check_stack`` checks each direction separately.

b) torch_npu, torch, CANN and Python, from the Ascend/pytorch compatibility
table shipped in ``data/compat-torch_npu.csv`` (see ``data/README.md``).

Version order (``version_key``), case-insensitive, one rule for every Ascend
and Python package version:

- dotted parts compare left to right, numbers numerically;
- in place of a number, ``RCn`` sorts below any number and ``Tn``/``Bn``
  (test and build numbers) below ``RCn``: ``8.0.T63 < 8.0.RC3 < 8.0.0 <
  8.1.RC1``, ``25.0.rc1.1 < 25.0.0``;
- a shorter version sorts below the versions it is a prefix of, so ``25.0``
  is the lowest ``25.0.*`` (the firmware's ``[25.0,25.0.]`` ranges rely on it);
- pre-releases sort below their release: ``alpha``/``beta``/``dev`` anywhere
  (``8.0.RC2.alpha001 < 8.0.RC2``, ``2.7.1.dev20250724 < 2.7.1``) and ``rcN``
  after three numbers (PEP 440 style: ``2.1.0.rc1 < 2.1.0``);
- ``postN`` sorts above its release (``2.1.0 < 2.1.0.post8``);
- a local part (``+cpu``) and anything after a space (``(beta)``) are ignored.
"""

from __future__ import annotations

import csv
import functools
import os
import re
from typing import Any, Callable, Iterable

TABLE_PATH = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "data", "compat-torch_npu.csv"
)

OK = "ok"
INCOMPATIBLE = "incompatible"
UNKNOWN = "unknown"

_TOKEN = re.compile(r"[a-z]+\d*|\d+")
_INNER = re.compile(r"V(\d+)R(\d+)C(\d+)", re.IGNORECASE)
_PYTHON = re.compile(r"^\s*(\d+)\.(\d+)")

# Ranks of one version part; every key ends with _END so that plain tuple
# comparison puts "25.0" below "25.0.rc1" but "8.0.RC2.alpha001" below "8.0.RC2".
_PRE, _END_RANK, _BUILD, _RC, _NUMBER, _POST = range(6)
_END = (_END_RANK, 0, 0)
_PRE_WORDS = {"dev": 0, "alpha": 1, "beta": 2, "rc": 3}


# --- version order ---------------------------------------------------------


def version_key(version: str) -> tuple[tuple[int, int, int], ...]:
    """A sort key for Ascend, torch and torch_npu versions (rules in the module docstring).

    Raises ``ValueError`` when the text holds no version at all.
    """
    tokens = _TOKEN.findall(_strip_local(version).lower())
    if not tokens:
        raise ValueError(f"no version in {version!r}")
    key = []
    leading_numbers = 0
    for index, token in enumerate(tokens):
        if token.isdigit():
            key.append((_NUMBER, 0, int(token)))
            if index == leading_numbers:
                leading_numbers += 1
            continue
        word = token.rstrip("0123456789")
        digits = token[len(word) :]
        number = int(digits) if digits else 0
        if word == "rc" and leading_numbers < 3:
            # Ascend "8.0.RC3": the release level in place of the patch number.
            key.append((_RC, 0, number))
        elif word in _PRE_WORDS:
            key.append((_PRE, _PRE_WORDS[word], number))
        elif word == "post":
            key.append((_POST, 0, number))
        else:
            key.append((_BUILD, 0, number))
    key.append(_END)
    return tuple(key)


def compare_versions(a: str, b: str) -> int:
    """-1, 0 or 1 as ``a`` sorts below, equal to or above ``b``."""
    key_a, key_b = version_key(a), version_key(b)
    return (key_a > key_b) - (key_a < key_b)


def is_prerelease(version: str) -> bool:
    """True for dev, alpha, beta, rc-suffix and T/B test builds (not for ``8.0.RC3``)."""
    return any(rank in (_PRE, _BUILD) for rank, _, _ in version_key(version))


def version_in_range(version: str, low: str, high: str) -> bool:
    """``low <= version <= high``; a high bound ending in a dot is open-ended.

    Firmware files write ``[23.0.0,23.0.0.]`` and ``[24.0,24.0.]``: the
    trailing dot reads as "this prefix followed by anything", so
    ``[24.0,24.0.]`` holds 24.0 and every 24.0.x (24.0.rc1, 24.0.0.2) but not
    24.1.rc1, and ``[23.0.rc3,23.0.rc3.]`` holds 23.0.rc3 and its hotfixes.
    """
    if compare_versions(version, low) < 0:
        return False
    if high.endswith("."):
        prefix = high.rstrip(".")
        return compare_versions(version, prefix) <= 0 or _has_prefix(version, prefix)
    return compare_versions(version, high) <= 0


def _has_prefix(version: str, prefix: str) -> bool:
    """True when ``prefix``'s parts open ``version``'s (``8.0.RC2`` opens ``8.0.RC2.alpha001``)."""
    head = version_key(prefix)[:-1]
    return version_key(version)[: len(head)] == head


def _strip_local(version: str) -> str:
    return version.strip().split()[0].split("+")[0] if version.strip() else ""


def _same(a: str, b: str) -> bool:
    try:
        return version_key(a) == version_key(b)
    except ValueError:
        return a.strip().lower() == b.strip().lower()


# --- a) driver, firmware, CANN ---------------------------------------------


def check_stack(driver: dict, firmware: dict, cann: dict) -> list[dict[str, Any]]:
    """One verdict per direction: driver↔firmware, firmware↔driver, driver↔CANN, CANN↔driver.

    Takes ``read_driver``, ``read_firmware`` and ``find_cann`` results (or the
    same dicts back from JSON). Pairs where neither side is installed are
    left out; a missing side or field gives ``unknown`` naming what is missing.
    """
    driver, firmware = driver or {}, firmware or {}
    entries = []
    if _installed(driver) or _installed(firmware):
        entries.append(_driver_accepts_firmware(driver, firmware))
        entries.append(_firmware_accepts_driver(firmware, driver))
    for install in (cann or {}).get("installs", []):
        if install.get("source") != "install_info":
            continue
        entries.append(_driver_accepts_cann(driver, install))
        entries.append(_cann_accepts_driver(install, driver))
    return entries


def _driver_accepts_firmware(driver: dict, firmware: dict) -> dict[str, Any]:
    return _decide(
        pair=f"{_label('driver', driver)} ↔ {_label('firmware', firmware)}",
        owner=("driver", driver, "compatible_version_fw", driver.get("accepts_firmware")),
        subject=("firmware", firmware, "Version", firmware.get("version")),
        match=_match_dotted,
    )


def _firmware_accepts_driver(firmware: dict, driver: dict) -> dict[str, Any]:
    return _decide(
        pair=f"{_label('firmware', firmware)} ↔ {_label('driver', driver)}",
        owner=("firmware", firmware, "compatible_version_drv", firmware.get("accepts_driver")),
        subject=("driver", driver, "Version", driver.get("version")),
        match=_match_dotted,
    )


def _driver_accepts_cann(driver: dict, install: dict) -> dict[str, Any]:
    name = f"CANN {install.get('kind')}"
    return _decide(
        pair=f"{_label('driver', driver)} ↔ {_label(name, install)}",
        owner=("driver", driver, "compatible_version", driver.get("accepts_cann")),
        subject=(name, install, "innerversion", install.get("inner_version")),
        match=_match_inner,
    )


def _cann_accepts_driver(install: dict, driver: dict) -> dict[str, Any]:
    name = f"CANN {install.get('kind')}"
    return _decide(
        pair=f"{_label(name, install)} ↔ {_label('driver', driver)}",
        owner=(name, install, "compatible_version", install.get("accepts_driver")),
        subject=("driver", driver, "Innerversion", driver.get("inner_version")),
        match=_match_inner,
    )


def _decide(
    pair: str,
    owner: tuple[str, dict, str, Any],
    subject: tuple[str, dict, str, str | None],
    match: Callable[[str, list[Any]], Any],
) -> dict[str, Any]:
    """Does ``owner``'s list accept ``subject``'s version? ``unknown`` names what is missing."""
    owner_name, owner_part, list_field, accepted = owner
    subject_name, subject_part, value_field, value = subject
    list_key, value_key = f"{owner_name}.{list_field}", f"{subject_name}.{value_field}"
    items = _items(accepted)
    fields: dict[str, Any] = {
        list_key: _render(items) if items is not None else None,
        value_key: value,
    }
    missing = _missing(owner_name, owner_part, list_key, items) or _missing(
        subject_name, subject_part, value_key, value
    )
    sides = (owner_name, subject_name)
    if missing:
        return _entry(pair, sides, UNKNOWN, fields, missing)
    try:
        hit = match(str(value), items or [])
    except ValueError as exc:
        reason = f"cannot compare {value_key} {value}: {exc}"
        return _entry(pair, sides, UNKNOWN, fields, reason)
    if hit is None:
        reason = f"{value_key} {value} is not in {list_key} {fields[list_key]}"
        return _entry(pair, sides, INCOMPATIBLE, fields, reason)
    fields["matched"] = _render([hit])
    reason = f"{value_key} {value} is within {fields['matched']}"
    return _entry(pair, sides, OK, fields, reason)


def _missing(name: str, part: dict, field: str, value: Any) -> str | None:
    if not _installed(part):
        return f"{name} is not installed"
    if value is None or value == "":
        error = part.get("error")
        return f"{field} is missing" + (f" ({error})" if error else "")
    if value == []:
        return f"{field} is empty: it lists nothing to match"
    return None


def _match_dotted(version: str, items: list[Any]) -> Any:
    """The first item that holds a dotted version: a range, or one version (or its prefix)."""
    for item in items:
        if isinstance(item, tuple):
            if version_in_range(version, item[0], item[1]):
                return item
        elif _same(version, item) or _has_prefix(version, item.rstrip(".")):
            return item
    return None


def _match_inner(inner: str, items: list[Any]) -> Any:
    """The first item that accepts an inner version: a prefix, or a V/R/C range."""
    for item in items:
        if isinstance(item, tuple):
            key, low, high = _inner_key(inner), _inner_key(item[0]), _inner_key(item[1])
            if None in (key, low, high):
                raise ValueError(f"not a VxxxRxxxCxx version range: [{item[0]},{item[1]}]")
            if low <= key <= high:
                return item
        elif inner.strip().upper().startswith(item.strip().upper()):
            return item
    return None


def _inner_key(inner: str) -> tuple[int, ...] | None:
    match = _INNER.match(inner.strip())
    return tuple(int(part) for part in match.groups()) if match else None


def _items(accepted: Any) -> list[Any] | None:
    """Accepted lists as parsed (tuples) or back from JSON (lists of two)."""
    if accepted is None:
        return None
    return [tuple(item) if isinstance(item, (list, tuple)) else item for item in accepted]


def _render(items: list[Any]) -> str:
    return ",".join(f"[{','.join(i)}]" if isinstance(i, tuple) else f"[{i}]" for i in items)


def _installed(part: dict) -> bool:
    """Install entries have no ``installed`` key: being listed means installed."""
    return bool(part) and bool(part.get("installed", True))


def _label(name: str, part: dict) -> str:
    if not _installed(part):
        return f"{name} (not installed)"
    return f"{name} {part.get('version') or '(version unknown)'}"


def _entry(
    pair: str, sides: tuple[str, str], verdict: str, fields: dict[str, Any], reason: str
) -> dict[str, Any]:
    owner, subject = sides
    return {
        "pair": pair,
        "owner": owner,
        "subject": subject,
        "verdict": verdict,
        "fields": fields,
        "reason": reason,
    }


def pair_verdicts(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One verdict per pair from ``check_stack``'s two directions, both kept.

    Driver and firmware must accept each other: either side refusing makes
    the pair incompatible. For driver and CANN the CANN package's list
    decides when it has one: a driver's ``compatible_version`` names the CANN
    releases known when the driver shipped, so newer CANN releases that name
    the driver among theirs run on it (seen: CANN 8.0.RC3 on driver
    24.1.rc2.2, CANN 8.5.0 on 25.3.rc1). The driver's list decides only when
    the CANN package names no drivers.
    """
    # check_stack lists the two directions of each pair one after the other.
    return [_combine(first, second) for first, second in zip(entries[::2], entries[1::2])]


def _combine(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    directions = [first, second]
    cann_side = next((d for d in directions if d["owner"].startswith("CANN")), None)
    if cann_side is not None and cann_side["verdict"] != UNKNOWN:
        verdict, reason = cann_side["verdict"], cann_side["reason"]
        driver_side = first if cann_side is second else second
        if verdict == OK and driver_side["verdict"] == INCOMPATIBLE:
            reason += "; the driver's own list predates this CANN"
    else:
        verdicts = [d["verdict"] for d in directions]
        verdict = INCOMPATIBLE if INCOMPATIBLE in verdicts else OK if OK in verdicts else UNKNOWN
        reason = "; ".join(d["reason"] for d in directions if d["verdict"] == verdict)
    return {"pair": first["pair"], "verdict": verdict, "reason": reason, "directions": directions}


# --- b) torch_npu, torch, CANN, Python -------------------------------------


@functools.lru_cache(maxsize=None)
def _table() -> tuple[dict[str, str | None], ...]:
    with open(TABLE_PATH, encoding="utf-8", newline="") as handle:
        rows = [
            {key: (value.strip() or None) for key, value in row.items()}
            for row in csv.DictReader(handle)
        ]
    return tuple(rows)


def load_table() -> list[dict[str, str | None]]:
    """The torch_npu table: cann, torch, torch_npu, python_min, python_max, branch, source.

    Blank cells (no Python range published for that torch) are ``None``.
    """
    return [dict(row) for row in _table()]


def check_python_stack(
    torch: str | None, torch_npu: str | None, cann: str | None, python: str | None
) -> dict[str, Any]:
    """Do these versions form a released torch_npu combination?

    ``ok`` when the table has a row with this torch and torch_npu, the CANN is
    one that pair supports and Python lies in the torch version's range.
    ``incompatible`` when the table contradicts a value; ``unknown`` when a
    value is missing or not in the table (dev and nightly builds, test CANN
    builds): the table cannot speak for them.
    """
    rows = _table()
    npu_rows = [row for row in rows if torch_npu and _same(row["torch_npu"] or "", torch_npu)]
    required = _required(npu_rows)
    notes: list[tuple[str, str]] = []
    if not torch_npu:
        notes.append((UNKNOWN, "torch_npu not given: no release to look up"))
    elif not npu_rows:
        kind = "a dev/pre-release build" if _prerelease(torch_npu) else "a release"
        notes.append((UNKNOWN, f"torch_npu {torch_npu} ({kind}) is not in the table"))
    else:
        notes.append(_check_torch(torch, torch_npu, required))
        notes.append(_check_cann(cann, torch_npu, required))
    range_torch = required.get("torch") or torch
    notes.append(_check_python(python, range_torch))
    verdicts = {verdict for verdict, _ in notes}
    verdict = INCOMPATIBLE if INCOMPATIBLE in verdicts else UNKNOWN if UNKNOWN in verdicts else OK
    return {
        "verdict": verdict,
        "reasons": [reason for _, reason in notes],
        "checks": [{"verdict": each, "reason": reason} for each, reason in notes],
        "matches": [dict(row) for row in rows if _fits(row, torch, torch_npu, cann, python)],
        "required": required,
    }


def required_for(
    cann: str | None = None, torch_npu: str | None = None, torch: str | None = None
) -> list[dict[str, str | None]]:
    """Table rows that fit a planned version set, for an upgrade review.

    A bare torch_npu release (``2.6.0``) names its whole line (2.6.0,
    2.6.0.post3, ...), as people say "torch_npu 2.6.0 on CANN 8.3.RC1";
    ``2.6.0.post3`` matches only itself.
    """
    return [
        dict(row)
        for row in _table()
        if (cann is None or _same(row["cann"] or "", cann))
        and (torch is None or _same(row["torch"] or "", torch))
        and (torch_npu is None or _same_line(row["torch_npu"] or "", torch_npu))
    ]


def _required(npu_rows: list[dict[str, str | None]]) -> dict[str, Any]:
    if not npu_rows:
        return {}
    first = npu_rows[0]
    return {
        "torch_npu": first["torch_npu"],
        "torch": first["torch"],
        "cann": [row["cann"] for row in npu_rows],
        "python_min": first["python_min"],
        "python_max": first["python_max"],
        "branch": [row["branch"] for row in npu_rows],
    }


def _check_torch(torch: str | None, torch_npu: str, required: dict[str, Any]) -> tuple[str, str]:
    if not torch:
        return UNKNOWN, "torch not given"
    if _same(torch, required["torch"]):
        return OK, f"torch {torch} with torch_npu {torch_npu} is a released pair"
    return (
        INCOMPATIBLE,
        f"torch_npu {torch_npu} is released for torch {required['torch']}, not {torch}",
    )


def _check_cann(cann: str | None, torch_npu: str, required: dict[str, Any]) -> tuple[str, str]:
    supported = required["cann"]
    listed = ", ".join(supported)
    if not cann:
        return UNKNOWN, f"CANN not given (torch_npu {torch_npu} needs CANN {listed})"
    if any(_same(cann, each) for each in supported):
        return OK, f"CANN {cann} is supported by torch_npu {torch_npu}"
    base = next((each for each in supported if _has_prefix(cann, each)), None)
    if base:
        return UNKNOWN, f"CANN {cann} is a build of {base}; the table lists only {base}"
    if _prerelease(cann):
        return UNKNOWN, f"CANN {cann} is a test/pre-release build, not in the table"
    sibling = next((each for each in supported if _release_line(each) == _release_line(cann)), None)
    if sibling:
        # A later RC of the same line (8.3.RC2 beside 8.3.RC1) is how people
        # run in practice; the table is silent on it, not against it.
        return (
            UNKNOWN,
            f"torch_npu {torch_npu} lists CANN {listed}; {cann} is another release "
            f"of the {_release_line(cann)} line, not in the table",
        )
    return INCOMPATIBLE, f"torch_npu {torch_npu} supports CANN {listed}, not {cann}"


def _release_line(version: str) -> str:
    """ "8.3" of "8.3.RC2": CANN's major.minor release line."""
    return ".".join(version.split(".")[:2])


def _check_python(python: str | None, torch: str | None) -> tuple[str, str]:
    if not python:
        return UNKNOWN, "Python not given"
    if not torch:
        return UNKNOWN, "torch not given: no Python range to check against"
    parsed = _python_version(python)
    if parsed is None:
        return UNKNOWN, f"cannot read Python version {python!r}"
    bounds = _python_range(torch)
    if bounds is None:
        return UNKNOWN, f"the table lists no Python range for torch {torch}"
    low, high = bounds
    shown = f"{parsed[0]}.{parsed[1]}"
    span = f"{low[0]}.{low[1]} to {high[0]}.{high[1]}"
    if low <= parsed <= high:
        return OK, f"Python {shown} is within {span} for torch {torch}"
    return INCOMPATIBLE, f"Python {shown} is outside {span} for torch {torch}"


def _python_range(torch: str | None) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The Python range the table gives for a torch version (the same on all its rows)."""
    if not torch:
        return None
    for row in _table():
        if row["python_min"] and row["python_max"] and _same(row["torch"] or "", torch):
            low, high = _python_version(row["python_min"]), _python_version(row["python_max"])
            if low and high:
                return low, high
    return None


def _python_version(text: str) -> tuple[int, int] | None:
    match = _PYTHON.match(text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _fits(
    row: dict[str, str | None],
    torch: str | None,
    torch_npu: str | None,
    cann: str | None,
    python: str | None,
) -> bool:
    """No given value contradicts the row (a row without a Python range cannot)."""
    checks: Iterable[tuple[str | None, str | None]] = (
        (torch, row["torch"]),
        (torch_npu, row["torch_npu"]),
        (cann, row["cann"]),
    )
    if any(given and not _same(given, value or "") for given, value in checks):
        return False
    parsed = _python_version(python) if python else None
    low = _python_version(row["python_min"] or "")
    high = _python_version(row["python_max"] or "")
    return parsed is None or low is None or high is None or low <= parsed <= high


def _same_line(row_version: str, planned: str) -> bool:
    """``planned`` is this version, or a bare release whose line this version belongs to."""
    if _same(row_version, planned):
        return True
    try:
        planned_key = version_key(planned)
        row_key = version_key(row_version)
    except ValueError:
        return False
    if any(rank != _NUMBER for rank, _, _ in planned_key[:-1]):
        return False
    numbers = planned_key[:-1]
    return row_key[: len(numbers)] == numbers and row_key[len(numbers)][0] != _NUMBER


def _prerelease(version: str) -> bool:
    try:
        return is_prerelease(version)
    except ValueError:
        return False


def current_cann_version(cann: dict[str, Any]) -> str | None:
    """The toolkit version ``ascend-toolkit/latest`` points to, else the newest toolkit found.

    Takes ``find_cann``'s result (or the same dict back from JSON).
    """
    installs = [i for i in cann.get("installs") or [] if isinstance(i, dict) and i.get("version")]
    toolkits = [str(i["version"]) for i in installs if i.get("kind") == "toolkit"]
    for link in cann.get("links") or []:
        path = str(link.get("path") or "")
        if (
            path.endswith("ascend-toolkit/latest")
            and link.get("target")
            and not link.get("dangling")
        ):
            name = str(link["target"]).rstrip("/").rsplit("/", 1)[-1]
            if name in toolkits:
                return name
    candidates = toolkits or [str(i["version"]) for i in installs]
    if not candidates:
        return None
    try:
        return max(candidates, key=functools.cmp_to_key(compare_versions))
    except ValueError:  # a version string the ordering cannot read
        return candidates[-1]
