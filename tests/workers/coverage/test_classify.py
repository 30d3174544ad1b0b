"""Each status from what really happens: exceptions, warnings, dead children, comparisons."""

from __future__ import annotations

import faulthandler
import os
import signal
import time
import warnings

import pytest
import torch

from workers.kinds.coverage import ERROR, MISMATCH, PASS, UNSUPPORTED
from workers.kinds.coverage.classify import (
    death_status,
    exception_status,
    fallback_warning,
    rank,
    timeout_status,
)
from workers.kinds.coverage.compare import compare, tolerance


def raised(call) -> BaseException:
    try:
        call()
    except Exception as exc:
        return exc
    raise AssertionError("it did not raise")


def test_a_kernel_missing_for_a_dtype_is_unsupported() -> None:
    # The CPU has no complex32 (chalf) kernel for exp.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "ComplexHalf support is experimental"
        exc = raised(lambda: torch.exp(torch.ones(2, dtype=torch.complex32)))
    status, error = exception_status(exc)
    assert status == UNSUPPORTED
    assert "not implemented for 'ComplexHalf'" in error
    assert error.startswith(type(exc).__name__ + ": ")


def test_a_kernel_missing_for_a_backend_is_unsupported() -> None:
    # A sparse tensor reaches a kernel registered for dense tensors only.
    sparse = torch.eye(3).to_sparse()
    exc = raised(lambda: torch.ops.aten.fmax(sparse, sparse))
    status, error = exception_status(exc)
    assert status == UNSUPPORTED
    assert "Could not run 'aten::fmax" in error
    assert "\n" not in error


def test_not_implemented_error_is_unsupported() -> None:
    def missing() -> None:
        raise NotImplementedError("no such thing\nhere")

    assert exception_status(raised(missing)) == (UNSUPPORTED, "NotImplementedError: here")


def test_any_other_exception_is_an_error_with_its_last_line_and_type() -> None:
    exc = raised(lambda: torch.ones(2, 3) @ torch.ones(2, 3))
    status, error = exception_status(exc)
    assert status == ERROR
    assert error.startswith("RuntimeError: mat1 and mat2 shapes cannot be multiplied")
    long = exception_status(ValueError("x" * 5000))[1]
    assert len(long) == 500
    assert long.endswith("...")


def test_a_cpu_fallback_warning_is_recognised_and_others_are_not() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn(
            "The operator 'aten::foo' is not currently supported on the NPU backend "
            "and will fall back to run on the CPU. This may have performance implications.",
            stacklevel=1,
        )
        warnings.warn("an unrelated deprecation", stacklevel=1)
    assert "fall back to run on the CPU" in fallback_warning(caught)
    assert fallback_warning(caught[1:]) is None


def test_a_child_killed_by_a_signal_is_a_crash_with_the_signal_name() -> None:
    pid = os.fork()
    if pid == 0:
        faulthandler.disable()  # pytest's would print every thread's stack
        os.abort()
    _, status = os.waitpid(pid, 0)
    assert death_status(status) == ("crash", "the process was killed by SIGABRT")
    pid = os.fork()
    if pid == 0:
        os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert death_status(status) == ("crash", "the process exited with code 3")


def test_a_hung_child_is_a_timeout() -> None:
    pid = os.fork()
    if pid == 0:
        while True:
            time.sleep(1)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert timeout_status(2.5) == ("timeout", "no result after 2.5 s: the process was killed")


def test_statuses_rank_from_pass_to_timeout() -> None:
    assert rank(PASS) < rank("fallback") < rank(MISMATCH) < rank(UNSUPPORTED) < rank("timeout")


def test_comparison_passes_within_the_dtype_precision_and_fails_beyond() -> None:
    exact = torch.linspace(-3, 3, 101, dtype=torch.float64)
    rtol, atol = tolerance("float16")
    assert compare(torch, exact.half(), exact, rtol, atol).ok
    wrong = exact.half().clone()
    wrong[7] += 0.5
    result = compare(torch, wrong, exact, rtol, atol)
    assert not result.ok
    assert result.max_abs == pytest.approx(0.5, abs=1e-2)


def test_comparison_wants_nan_in_the_same_places() -> None:
    expected = torch.tensor([1.0, float("nan"), float("inf")], dtype=torch.float64)
    assert compare(torch, expected.float(), expected, 1e-6, 1e-6).ok
    moved = torch.tensor([float("nan"), 1.0, float("inf")])
    assert "NaN" in compare(torch, moved, expected, 1e-6, 1e-6).problem
    assert "shape" in compare(torch, torch.ones(2), torch.ones(3), 0, 0).problem


def test_values_are_not_compared_where_they_mean_nothing_but_shapes_are() -> None:
    assert compare(torch, torch.rand(4), torch.rand(4), 0, 0, values=False).ok
    assert not compare(torch, torch.rand(4), torch.rand(5), 0, 0, values=False).ok
