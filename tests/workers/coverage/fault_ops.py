"""Custom ops that misbehave on purpose, with OpInfo entries, for the isolation tests.

Imported by a coverage run that names ``tests.workers.coverage.fault_ops:NAME``
in its ``ops``: the runner imports it before forking, so the ops registered
here through torch.library exist in every child.
"""

from __future__ import annotations

import os
import time

import torch
from torch.testing._internal.opinfo.core import OpInfo, SampleInput

# Set in a child by ``corrupt``: ``victim`` aborts when it finds it, as a
# kernel would after another one left the process in a bad state.
_CORRUPTED = {"flag": False}


@torch.library.custom_op("npulab_test::abort", mutates_args=())
def abort(x: torch.Tensor) -> torch.Tensor:
    os.abort()


@torch.library.custom_op("npulab_test::hang", mutates_args=())
def hang(x: torch.Tensor) -> torch.Tensor:
    while True:
        time.sleep(1)


@torch.library.custom_op("npulab_test::corrupt", mutates_args=())
def corrupt(x: torch.Tensor) -> torch.Tensor:
    _CORRUPTED["flag"] = True
    return x.clone()


@torch.library.custom_op("npulab_test::victim", mutates_args=())
def victim(x: torch.Tensor) -> torch.Tensor:
    if _CORRUPTED["flag"]:
        os.abort()
    return x * 2


def _one_sample(op_info, device, dtype, requires_grad, **kwargs):
    yield SampleInput(torch.ones(3, device=device, dtype=dtype))


def _entry(name: str, fn) -> OpInfo:
    return OpInfo(
        name,
        op=fn,
        dtypes=(torch.float32,),
        sample_inputs_func=_one_sample,
        supports_out=False,
        supports_autograd=False,
    )


ABORT = _entry("npulab_test.abort", torch.ops.npulab_test.abort)
HANG = _entry("npulab_test.hang", torch.ops.npulab_test.hang)
CORRUPT = _entry("npulab_test.corrupt", torch.ops.npulab_test.corrupt)
VICTIM = _entry("npulab_test.victim", torch.ops.npulab_test.victim)
