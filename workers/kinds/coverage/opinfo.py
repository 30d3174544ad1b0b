"""PyTorch's operator database (OpInfo): which ops to test, in which dtypes, held to what.

``torch.testing._internal.common_methods_invocations.op_db`` lists every
operator PyTorch tests, with sample inputs per dtype, the dtypes it claims
per device type, and decorators that say where its own tests skip or widen
their tolerances. Those decorators are how it says an op's output cannot be
compared (random ops, ``empty*``): such an op is checked for running and
for the shape of its outputs only.
"""

from __future__ import annotations

import fnmatch
import importlib
import sys
from typing import Any, Iterable

OP_DB_MODULE = "torch.testing._internal.common_methods_invocations"
# The modules whose ``extract_test_fn`` OpInfo calls (the second imported it by name).
_TEST_LOOKUP_MODULES = (
    "torch.testing._internal.common_utils",
    "torch.testing._internal.opinfo.core",
)
# The test whose decorators speak for a device-against-CPU comparison.
COMPARE_TEST = ("TestCommon", "test_compare_cpu")
# Tests that hold an op to a higher-precision reference (NumPy, float64), as a
# CPU run does: their tolerance overrides apply there.
_REFERENCE_TESTS = (
    "test_numpy_ref",
    "test_numpy_refs",
    "test_reference_testing",
    "test_complex_half_reference_testing",
    "test_reference_numerics",
    "test_reference_numerics_normal",
    "test_reference_numerics_small",
    "test_reference_numerics_large",
    "test_reference_numerics_extremal",
)
# Plain decorators of an OpInfo that limit it to one device type (the jiterator ops).
_ONLY = {"onlyCUDA": "cuda", "onlyCPU": "cpu"}
# Skip reasons, on any test, that say the output is not a function of the input.
_NOT_COMPARABLE_WORDS = ("not comparable", "non-deterministic", "nondeterministic", "random")


class OpDbUnavailable(Exception):
    """op_db does not import in this interpreter; the message says how to fix it."""


def load_op_db() -> list[Any]:
    try:
        module = importlib.import_module(OP_DB_MODULE)
    except ModuleNotFoundError as exc:
        missing = exc.name or str(exc)
        raise OpDbUnavailable(
            f"No module named {missing!r}: install it in the run's interpreter: "
            f"pip install {missing.split('.')[0]}"
        ) from exc
    except Exception as exc:
        raise OpDbUnavailable(f"import {OP_DB_MODULE} failed: {type(exc).__name__}: {exc}") from exc
    return list(module.op_db)


def skip_test_lookup() -> None:
    """Spare OpInfo its search for the unittest test that runs it: there is none here.

    Each ``sample_inputs`` call looks twice for a ``unittest.TestCase`` on the stack
    (``common_utils.extract_test_fn``: ``inspect.stack()``, every frame's source read) to
    find the test's seed and its per-sample skips. A coverage case is never run by a
    test, so the search always ends with None; made anyway, it was a third of a case's
    time. Done before the children fork, so they inherit it.
    """
    for name in _TEST_LOOKUP_MODULES:
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "extract_test_fn"):
            module.extract_test_fn = _no_test  # type: ignore[attr-defined]


def _no_test() -> None:
    return None


def full_name(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def select(ops: Iterable[Any], include: list[str], exclude: list[str]) -> list[Any]:
    """The ops whose name or name.variant matches an include pattern and no exclude."""

    def matches(op: Any, patterns: list[str]) -> bool:
        names = (op.name, full_name(op))
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns for name in names)

    return [
        op
        for op in ops
        if (not include or matches(op, include)) and not (exclude and matches(op, exclude))
    ]


def resolve(names: list[str], op_db: list[Any]) -> tuple[list[Any], list[str]]:
    """The OpInfos ``names`` stand for, and the names that stand for none.

    A name is an op_db name (every variant of it), ``name.variant``, or
    ``package.module:attr`` naming an OpInfo or a list of them, a user's own
    for a custom op: importing the module here registers its torch.library
    ops in this process, so the children forked from it have them too.
    """
    by_name: dict[str, list[Any]] = {}
    for op in op_db:
        by_name.setdefault(op.name, []).append(op)
        if op.variant_test_name:
            by_name.setdefault(full_name(op), []).append(op)
    found: list[Any] = []
    unknown: list[str] = []
    for name in names:
        if ":" in name:
            module_name, attr = name.split(":", 1)
            value = getattr(importlib.import_module(module_name), attr, None)
            entries = list(value) if isinstance(value, (list, tuple)) else [value]
            if value is None or not all(hasattr(entry, "sample_inputs") for entry in entries):
                unknown.append(name)
                continue
            found.extend(entries)
        elif name in by_name:
            found.extend(by_name[name])
        else:
            unknown.append(name)
    return found, unknown


def claimed_dtypes(op: Any, device_type: str) -> list[Any]:
    """The dtypes the op claims on this device type, in a fixed order (none where its
    OpInfo limits it to another device type)."""
    for decorator in getattr(op, "decorators", ()) or ():
        only = _ONLY.get(getattr(decorator, "__name__", ""))
        if only is not None and only != device_type:
            return []
    return sorted(op.supported_dtypes(device_type), key=str)


def backward_claimed(op: Any, device_type: str, dtype: Any) -> bool:
    if not op.supports_autograd or not (dtype.is_floating_point or dtype.is_complex):
        return False
    return dtype in op.supported_backward_dtypes(device_type)


def comparability(op: Any, device_type: str, dtype: Any) -> str:
    """Why the op's output cannot be compared with a reference ("" when it can)."""
    if op.name.startswith(("empty", "new_empty")):
        return "uninitialised memory"
    for info in _decorators(op):
        reasons = [_skip_reason(decorator) for decorator in info.decorators]
        reasons = [reason for reason in reasons if reason is not None]
        if not reasons or not _active(info, device_type, dtype):
            continue
        if (info.cls_name, info.test_name) == COMPARE_TEST:
            return reasons[0] or "skipped by its OpInfo's test_compare_cpu"
        for reason in reasons:
            if any(word in reason.lower() for word in _NOT_COMPARABLE_WORDS):
                return reason
    return ""


def tolerance_override(op: Any, device_type: str, dtype: Any) -> tuple[float, float] | None:
    """The widest (rtol, atol) OpInfo declares for comparing this op with its reference:
    with the CPU (test_compare_cpu) on a device, with a higher-precision reference on the CPU."""
    rtol = atol = None
    for info in _decorators(op):
        if device_type == "cpu":
            wanted = info.test_name in _REFERENCE_TESTS
        else:
            wanted = (info.cls_name, info.test_name) == COMPARE_TEST
        if not wanted or not _active(info, device_type, dtype):
            continue
        for decorator in info.decorators:
            tolerances = getattr(decorator, "d", None)
            if not isinstance(tolerances, dict) or dtype not in tolerances:
                continue
            value = tolerances[dtype]
            if hasattr(value, "rtol"):  # toleranceOverride: tol(atol, rtol)
                found = (float(value.rtol), float(value.atol))
            else:  # precisionOverride: an atol
                found = (0.0, float(value))
            rtol = found[0] if rtol is None else max(rtol, found[0])
            atol = found[1] if atol is None else max(atol, found[1])
    return None if rtol is None or atol is None else (rtol, atol)


def _decorators(op: Any) -> list[Any]:
    return [info for info in getattr(op, "decorators", ()) or () if hasattr(info, "is_active")]


def _active(info: Any, device_type: str, dtype: Any) -> bool:
    try:
        return bool(info.is_active(info.cls_name, info.test_name, device_type, dtype, {}))
    except Exception:  # an active_if callable that wants the test's own parameters
        return False


def _skip_reason(decorator: Any) -> str | None:
    """The reason of a ``unittest.skip(reason)`` decorator, None for any other decorator."""
    if getattr(decorator, "__qualname__", "") != "skip.<locals>.decorator":
        return None
    cells = getattr(decorator, "__closure__", None) or ()
    texts = [cell.cell_contents for cell in cells if isinstance(cell.cell_contents, str)]
    return texts[0] if texts else ""
