"""A result against its reference: the tolerances it is held to, and how far off it is.

The reference of a device run is the CPU in the same dtype. On the CPU itself
the reference is the same op on the same input values upcast to float64
(complex128 for complex): so a CPU run measures the error of a low-precision
kernel against exact-ish arithmetic, and the tolerance of a dtype is its own
precision. Integer and bool dtypes have no wider exact type to run in, so on
the CPU their op's own result (a second run on the same inputs) is the
reference: it must match exactly, which finds a nondeterministic kernel but
not a wrong one.
"""

from __future__ import annotations

import math
from typing import Any

# (rtol, atol) per tested dtype, against a float64 reference on the CPU and
# a same-dtype CPU result on a device. rtol is about the dtype's rounding
# (float16: 10 mantissa bits, 2^-10 ~ 1e-3; bfloat16: 7 bits, 2^-6 ~ 1.6e-2
# with one rounding of slack; float32 ~ 1.3e-6 as torch.testing uses). atol
# is the floor for results near zero, where a sum of rounded terms that
# cancel leaves an error of the terms' size, not the result's: OpInfo samples
# are O(1..10), so the floor is a few ulps at 1 in the dtype.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1.3e-6, 1e-5),
    "float16": (1e-3, 1e-3),
    "bfloat16": (1.6e-2, 1e-2),
    "complex128": (1e-7, 1e-7),
    "complex64": (1.3e-6, 1e-5),
    "complex32": (1e-3, 1e-3),
    # 3 and 2 mantissa bits: an op on float8 is mostly a copy or a cast.
    "float8_e4m3fn": (1.25e-1, 1e-2),
    "float8_e4m3fnuz": (1.25e-1, 1e-2),
    "float8_e5m2": (2.5e-1, 1e-2),
    "float8_e5m2fnuz": (2.5e-1, 1e-2),
}
# Integer and bool results are exact or wrong.
EXACT = (0.0, 0.0)


def tolerance(dtype: str, override: tuple[float, float] | None = None) -> tuple[float, float]:
    """The (rtol, atol) for ``dtype``: the table's, widened to an OpInfo override if any."""
    rtol, atol = TOLERANCES.get(dtype, EXACT)
    if override is not None:
        rtol, atol = max(rtol, override[0]), max(atol, override[1])
    return rtol, atol


class Comparison:
    """How far a result is from its reference; ``problem`` says why it does not match."""

    def __init__(self) -> None:
        self.max_abs: float | None = None
        self.max_rel: float | None = None
        self.problem = ""

    @property
    def ok(self) -> bool:
        return not self.problem

    def fail(self, problem: str) -> None:
        if not self.problem:
            self.problem = problem

    def errors(self, abs_err: float, rel_err: float) -> None:
        self.max_abs = _larger(self.max_abs, abs_err)
        self.max_rel = _larger(self.max_rel, rel_err)


def _larger(old: float | None, new: float) -> float | None:
    if not math.isfinite(new):
        return old
    return new if old is None or new > old else old


def leaves(torch: Any, value: Any) -> list[Any]:
    """The tensors and numbers of an output, in order (tuples, lists, dicts, return types)."""
    flat, _ = torch.utils._pytree.tree_flatten(value)
    return [leaf for leaf in flat if isinstance(leaf, (torch.Tensor, bool, int, float, complex))]


def compare(
    torch: Any,
    actual: Any,
    expected: Any,
    rtol: float,
    atol: float,
    values: bool = True,
    dtypes: bool = False,
) -> Comparison:
    """Compare two outputs leaf by leaf: structure, shapes, dtypes if asked, values if asked.

    NaN must be NaN in the same places and infinities equal; finite elements
    pass when ``|a - e| <= atol + rtol * max(|e|, mean |e|)``: an element that
    a sum of large terms cancelled to near zero (a matmul, a convolution)
    carries the rounding error of those terms, which the tensor's mean
    magnitude stands for, not the element's own.
    """
    result = Comparison()
    got, want = leaves(torch, actual), leaves(torch, expected)
    if len(got) != len(want):
        result.fail(f"{len(got)} outputs where the reference has {len(want)}")
        return result
    for position, (a, e) in enumerate(zip(got, want)):
        a, e = _as_tensor(torch, a), _as_tensor(torch, e)
        if a is None or e is None:
            continue  # a layout with no dense values (quantized, nested): ran is all we know
        where = f"output {position}: " if len(got) > 1 else ""
        if tuple(a.shape) != tuple(e.shape):
            result.fail(f"{where}shape {list(a.shape)} where the reference has {list(e.shape)}")
            continue
        if dtypes and a.dtype != e.dtype:
            result.fail(f"{where}dtype {a.dtype} where the reference has {e.dtype}")
            continue
        if values and a.numel():
            _compare_values(torch, a, e, rtol, atol, where, result)
    return result


def _as_tensor(torch: Any, value: Any) -> Any:
    if not isinstance(value, torch.Tensor):
        return torch.tensor(value)
    value = value.detach()
    if value.is_quantized or value.is_nested or value.device.type == "meta":
        return None
    if value.layout != torch.strided:
        value = value.to_dense()  # sparse layouts
    return value.cpu().resolve_conj().resolve_neg()


def _compare_values(
    torch: Any, a: Any, e: Any, rtol: float, atol: float, where: str, result: Comparison
) -> None:
    # An output in a lower precision than the tested dtype (a float result of
    # an integer op, a float32 result of a float64 input) gets that precision.
    own_rtol, own_atol = TOLERANCES.get(str(a.dtype).replace("torch.", ""), EXACT)
    rtol, atol = max(rtol, own_rtol), max(atol, own_atol)
    wide = torch.complex128 if a.is_complex() or e.is_complex() else torch.float64
    a, e = a.to(wide), e.to(wide)
    nan_a, nan_e = torch.isnan(a), torch.isnan(e)
    if not torch.equal(nan_a, nan_e):
        result.fail(f"{where}NaN in other places than the reference")
    finite = torch.isfinite(a) & torch.isfinite(e)
    infinite = ~finite & ~(nan_a | nan_e)
    if bool(infinite.any()) and not torch.equal(a[infinite], e[infinite]):
        result.fail(f"{where}infinities where the reference differs")
    if not bool(finite.any()):
        return
    a, e = a[finite], e[finite]
    difference = (a - e).abs()
    scale = e.abs()
    abs_err = float(difference.max())
    nonzero = scale > 0
    rel_err = float((difference[nonzero] / scale[nonzero]).max()) if bool(nonzero.any()) else 0.0
    result.errors(abs_err, rel_err)
    allowed = atol + rtol * torch.clamp(scale, min=float(scale.mean()))
    if bool((difference > allowed).any()):
        result.fail(f"{where}values differ by up to {abs_err:.3g} (rtol {rtol:g}, atol {atol:g})")
