"""One case, run in a child process: each sample on the device and on the reference, compared.

Runs only in the children the pool forks: this is where ops execute. A
case's result is a plain dict (it crosses a pipe to the runner process),
with the fields of its op_result row.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Callable, Iterator

from workers.kinds.coverage import (
    BACKWARD,
    ERROR,
    FALLBACK,
    MISMATCH,
    PASS,
    UNCLAIMED,
    UNSUPPORTED,
    UNTESTED,
)
from workers.kinds.coverage.cases import Case
from workers.kinds.coverage.classify import exception_status, fallback_warning, rank
from workers.kinds.coverage.compare import compare, leaves, tolerance

# Where the reference of a device run lives, and the names a CPU run's reference has.
CPU_REFERENCE = "cpu"
WIDE_REFERENCE = "float64"


class Environment:
    """What a child runs its cases with: the device, how the reference is made, the seed."""

    def __init__(
        self,
        torch: Any,
        device: Any,
        synchronize: Callable[[], None],
        seed: int,
        all_samples: bool,
        report: Callable[[int, int, list[list[int]]], None],
    ) -> None:
        self.torch = torch
        self.device = device
        self.on_cpu = device.type == "cpu"
        self.synchronize = synchronize
        self.seed = seed
        self.all_samples = all_samples
        # Tells the runner which sample is starting, so a death is pinned on it.
        self.report = report


class Sample:
    """One call to make: the function, its inputs, and what is compared of its output."""

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple,
        kwargs: dict[str, Any],
        post: Callable[[Any], Any] = lambda output: output,
        written: tuple = (),
        inputs: str = "",
    ) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.post = post
        # Positions (ints) and names (strs) of arguments the op writes: their
        # values after the call are outputs too (in-place and out= ops).
        self.written = written
        self.inputs = inputs


class SampleResult:
    def __init__(self, status: str, error: str | None = None, detail: dict | None = None) -> None:
        self.status = status
        self.error = error
        self.max_abs: float | None = None
        self.max_rel: float | None = None
        self.detail = detail or {}


def execute(case: Case, env: Environment) -> dict[str, Any]:
    """Run every sample of ``case`` (the first unless all are asked); the worst one decides."""
    started = time.perf_counter()
    with warnings.catch_warnings():
        # Warnings of making and moving inputs say nothing of the op (its own
        # are caught around its call): kept out of the run's log.
        warnings.simplefilter("ignore")
        result = _execute(case, env)
    result["seconds"] = time.perf_counter() - started
    return result


def _execute(case: Case, env: Environment) -> dict[str, Any]:
    env.torch.manual_seed(env.seed)  # the same inputs in any batch, alone or not
    worst: SampleResult | None = None
    max_abs = max_rel = None
    count = 0
    empty = 0
    for sample in _samples(case, env):
        if isinstance(sample, SampleResult):  # the sample inputs could not be made
            outcome = sample
        elif _empty(env.torch, sample):
            # No elements: the op returns before its kernel's dtype dispatch, so a "pass"
            # here would say nothing of the dtype (linalg.svd in float16 did).
            empty += 1
            continue
        else:
            env.report(case.index, count, shapes(env.torch, sample))
            outcome = run_sample(case, sample, env)
            count += 1
            max_abs = _max(max_abs, outcome.max_abs)
            max_rel = _max(max_rel, outcome.max_rel)
        if worst is None or rank(outcome.status) > rank(worst.status):
            worst = outcome
        if rank(worst.status) >= rank(UNSUPPORTED) or not env.all_samples:
            break
    if worst is None and empty:
        worst = SampleResult(
            UNTESTED, f"only samples with no elements ({empty}): the dtype was never dispatched"
        )
    if worst is None:
        worst = SampleResult(ERROR, "no sample inputs for this op and dtype")
    detail = dict(worst.detail)
    if empty:
        detail["empty_samples_skipped"] = empty
    if not case.claimed:
        detail["claimed"] = False  # tested because the spec listed the dtype
        if worst.status == PASS:
            worst.status = UNCLAIMED
    return {
        "status": worst.status,
        "error": worst.error,
        "max_abs_err": max_abs,
        "max_rel_err": max_rel,
        "samples": count,
        "detail": detail,
    }


def _empty(torch: Any, sample: Sample) -> bool:
    """Whether the sample's input (its first tensor) holds no elements."""
    for leaf in leaves(torch, (sample.args, sample.kwargs)):
        if isinstance(leaf, torch.Tensor):
            return leaf.numel() == 0
    return False


def _max(old: float | None, new: float | None) -> float | None:
    if new is None:
        return old
    return new if old is None or new > old else old


def _samples(case: Case, env: Environment) -> Iterator[Any]:
    if isinstance(case.target, list):  # a model's recorded calls
        for record in case.target:
            yield record.sample(env.torch)
        return
    op = case.target
    dtype = getattr(env.torch, case.dtype)
    # Inputs are made on the CPU and moved: the same values on every device stack.
    generated = op.sample_inputs("cpu", dtype, requires_grad=case.pass_ == BACKWARD)
    iterator = iter(generated)
    while True:
        try:
            sample = next(iterator)
        except StopIteration:
            return
        except Exception as exc:
            status, error = exception_status(exc)
            yield SampleResult(status, "sample inputs: " + error)
            return
        yield Sample(
            op, (sample.input, *sample.args), dict(sample.kwargs), sample.output_process_fn_grad
        )


def shapes(torch: Any, sample: Sample) -> list[list[int]]:
    flat = leaves(torch, (sample.args, sample.kwargs))
    return [list(leaf.shape) for leaf in flat if isinstance(leaf, torch.Tensor)]


def run_sample(case: Case, sample: Sample, env: Environment) -> SampleResult:
    torch = env.torch
    rtol, atol = tolerance(case.dtype, case.override)
    detail: dict[str, Any] = {"shapes": shapes(torch, sample)}
    if sample.inputs:
        detail["inputs"] = sample.inputs
    args, kwargs = _moved(torch, sample, lambda t: _to_device(t, env.device))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            actual = _call(torch, sample, args, kwargs, case, env)
            env.synchronize()
        except Exception as exc:
            status, error = exception_status(exc)
            if status == ERROR and not case.claimed:
                # Refused in a dtype the op does not claim: there is no kernel for it here
                # ("Boolean inputs not supported for relu" says so in its own words).
                status = UNSUPPORTED
            return SampleResult(status, error, detail)
    fallback = fallback_warning(caught)
    values = not case.not_comparable
    reference = _reference_name(torch, case.dtype, env.on_cpu)
    try:
        args, kwargs = _moved(torch, sample, lambda t: _to_reference(torch, t, env.on_cpu))
        expected = _call(torch, sample, args, kwargs, case, env)
    except Exception as exc:
        # Nothing to hold the result to: it ran, and that is all that is known.
        values = False
        reference = f"none: the reference run failed ({exception_status(exc)[1]})"
        expected = actual
    if case.not_comparable:
        reference += f"; shapes only: {case.not_comparable}"
    detail.update(reference=reference, rtol=rtol, atol=atol)
    comparison = compare(torch, actual, expected, rtol, atol, values=values, dtypes=not env.on_cpu)
    if not comparison.ok:
        result = SampleResult(MISMATCH, comparison.problem, detail)
    elif fallback:
        result = SampleResult(FALLBACK, fallback, dict(detail, warning=fallback))
    else:
        result = SampleResult(PASS, None, detail)
    result.max_abs, result.max_rel = comparison.max_abs, comparison.max_rel
    return result


def _reference_name(torch: Any, dtype: str, on_cpu: bool) -> str:
    if not on_cpu:
        return CPU_REFERENCE
    kind = getattr(torch, dtype, None)
    if isinstance(kind, torch.dtype) and kind.is_complex:
        return "complex128"
    if isinstance(kind, torch.dtype) and kind.is_floating_point:
        return WIDE_REFERENCE
    return "the op's own result: no wider type for integers"


def _moved(torch: Any, sample: Sample, move: Callable[[Any], Any]) -> tuple[tuple, dict]:
    def one(value: Any) -> Any:
        return move(value) if isinstance(value, torch.Tensor) else value

    return torch.utils._pytree.tree_map(one, (sample.args, sample.kwargs))


def _to_device(tensor: Any, device: Any) -> Any:
    moved = tensor.detach().clone() if device.type == "cpu" else tensor.detach().to(device)
    return moved.requires_grad_(tensor.requires_grad)


def _to_reference(torch: Any, tensor: Any, on_cpu: bool) -> Any:
    value = tensor.detach()
    if on_cpu and value.is_complex():
        value = value.to(torch.complex128)
    elif on_cpu and value.is_floating_point():
        value = value.to(torch.float64)
    else:
        value = value.cpu().clone()
    return value.requires_grad_(tensor.requires_grad)


def _call(torch: Any, sample: Sample, args: tuple, kwargs: dict, case: Case, env: Any) -> Any:
    output = sample.post(sample.fn(*args, **kwargs))
    if case.pass_ == BACKWARD:
        return _gradients(torch, output, (args, kwargs), env.seed, getattr(torch, case.dtype))
    if sample.written:
        written = [args[key] if isinstance(key, int) else kwargs.get(key) for key in sample.written]
        return (output, written)
    return output


def _gradients(torch: Any, output: Any, inputs: Any, seed: int, dtype: Any) -> list[Any]:
    """Gradients of the inputs for a fixed random cotangent of the differentiable outputs.

    A fixed cotangent (drawn in float64, rounded to the output's dtype, the
    same values on both sides) rather than a plain sum: the gradient of a
    sum of softmax outputs is zero, which any kernel gets right.
    """
    sources = [leaf for leaf in leaves(torch, inputs) if _grad_tensor(torch, leaf)]
    outputs = [leaf for leaf in leaves(torch, output) if _grad_tensor(torch, leaf)]
    if not sources or not outputs:
        raise ValueError("nothing to differentiate: no output depends on an input with gradient")
    generator = torch.Generator().manual_seed(seed)
    loss = 0
    for out in outputs:
        real = torch.view_as_real(out.resolve_conj()) if out.is_complex() else out
        cotangent = torch.randn(real.shape, generator=generator, dtype=torch.float64)
        cotangent = cotangent.to(_real_dtype(torch, dtype)).to(real)
        loss = loss + (real * cotangent).sum()
    return list(torch.autograd.grad(loss, sources, allow_unused=True))


def _grad_tensor(torch: Any, value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.requires_grad


def _real_dtype(torch: Any, dtype: Any) -> Any:
    real = {torch.complex32: torch.float16, torch.complex64: torch.float32}
    return real.get(dtype, torch.float64 if dtype.is_complex else dtype)
