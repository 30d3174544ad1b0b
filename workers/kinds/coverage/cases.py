"""The cases of a coverage run: one per op × variant × dtype × pass, each one result row."""

from __future__ import annotations

from typing import Any

from workers.kinds.coverage import BACKWARD, FORWARD
from workers.kinds.coverage import opinfo as opinfos


class Case:
    """One row of the matrix and what a child needs to produce it.

    ``target`` is the OpInfo, or for a model the recorded calls of one
    overload in one dtype (each call a sample). ``not_comparable`` says why
    the output cannot be compared ("" when it can); ``override`` is an
    OpInfo's own (rtol, atol) for this op and dtype.
    """

    __slots__ = (
        "claimed",
        "dtype",
        "index",
        "not_comparable",
        "op",
        "override",
        "pass_",
        "target",
        "variant",
    )

    def __init__(
        self,
        op: str,
        variant: str,
        dtype: str,
        pass_: str,
        target: Any,
        claimed: bool = True,
        not_comparable: str = "",
        override: tuple[float, float] | None = None,
    ) -> None:
        self.index = -1
        self.op = op
        self.variant = variant
        self.dtype = dtype
        self.pass_ = pass_
        self.target = target
        self.claimed = claimed
        self.not_comparable = not_comparable
        self.override = override

    def row(self) -> dict[str, str]:
        """The fields that name this case's op_result row."""
        return {"op": self.op, "variant": self.variant, "dtype": self.dtype, "pass": self.pass_}

    def label(self) -> str:
        variant = f".{self.variant}" if self.variant else ""
        return f"{self.op}{variant} {self.dtype} {self.pass_}"


def dtype_name(dtype: Any) -> str:
    """torch.float32 -> "float32"."""
    return str(dtype).replace("torch.", "")


def plan_opinfo(
    torch: Any, ops: list[Any], device_type: str, dtypes: list[str], backward: bool
) -> list[Case]:
    """A forward case per op × dtype (the op's claimed dtypes, or exactly ``dtypes``), and a
    backward case beside it where the op has gradients in that dtype."""
    cases: list[Case] = []
    seen: set[int] = set()
    for op in ops:
        if id(op) in seen:  # named twice in a list
            continue
        seen.add(id(op))
        claimed = opinfos.claimed_dtypes(op, device_type)
        wanted = [getattr(torch, name) for name in dtypes] if dtypes else claimed
        for dtype in wanted:
            shared = {
                "target": op,
                "claimed": dtype in claimed,
                "not_comparable": opinfos.comparability(op, device_type, dtype),
                "override": opinfos.tolerance_override(op, device_type, dtype),
            }
            name = dtype_name(dtype)
            cases.append(Case(op.name, op.variant_test_name, name, FORWARD, **shared))
            differentiable = dtype.is_floating_point or dtype.is_complex
            if (
                backward
                and op.supports_autograd
                and differentiable
                and (dtypes or opinfos.backward_claimed(op, device_type, dtype))
            ):
                cases.append(Case(op.name, op.variant_test_name, name, BACKWARD, **shared))
    return number(cases)


def plan_model(records: list[Any], dtypes: list[str]) -> list[Case]:
    """One case per recorded overload and dtype; its recorded calls are its samples.

    ``dtypes``, when given, keeps the calls whose dtype is listed: a model's
    ops are tested in the dtypes it ran them in.
    """
    groups: dict[tuple[str, str, str], list[Any]] = {}
    for record in records:
        if dtypes and record.dtype not in dtypes:
            continue
        groups.setdefault((record.op, record.overload, record.dtype), []).append(record)
    cases = [
        Case(op, overload, dtype, FORWARD, calls, not_comparable=calls[0].not_comparable)
        for (op, overload, dtype), calls in groups.items()
    ]
    return number(cases)


def number(cases: list[Case]) -> list[Case]:
    for index, case in enumerate(cases):
        case.index = index
    return cases
