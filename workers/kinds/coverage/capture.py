"""Op set ``model``: record the aten ops an entry calls, with their first real inputs.

The entry (a script run unmodified as ``__main__``, ``module:function`` or a
built-in job) runs on the CPU in a child forked from the runner, under a
TorchDispatchMode that sees every aten op overload it calls, forward and
backward. It stops after ``capture_steps`` optimizer steps or ``capture_s``
seconds, whichever comes first, by raising a private exception that
unwinds the entry (an entry that ends by itself is fine too). Each distinct
(overload, input dtypes and shapes) keeps its first real inputs, up to a
total size; beyond it the shapes are kept and random inputs of those shapes
are made when the op is replayed.
"""

from __future__ import annotations

import importlib
import os
import pickle
import shutil
import signal
import sys
import time
import traceback
from typing import Any

from workers.contract import script_env
from workers.kinds.coverage.cases import dtype_name
from workers.kinds.coverage.execute import Sample

# Real inputs kept for replay, all ops together.
MAX_RECORDED_BYTES = 256 * 1024 * 1024
# How long past capture_s an entry stuck outside Python (where the stop cannot reach) may take.
CAPTURE_GRACE_S = 60.0
CAPTURE_DIR = "capture"
CAPTURE_FILE = "capture.pickle"
# Namespaces of ops that are bookkeeping, not kernels (record_function around optimizer.step).
_NOT_KERNELS = ("profiler",)
# Ops whose output is uninitialised memory: they are checked for running and shapes only.
_UNINITIALISED = ("aten::resize_", "aten::resize_as_", "aten::set_")


class CaptureFailed(Exception):
    """Nothing was recorded; the message is why (the entry's error, or how its process died)."""


class _Stop(BaseException):
    """Unwinds the entry when the capture has seen enough (not an Exception: a script's
    ``except Exception`` must not swallow it)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class Synthetic:
    """An input too big to keep: its shape and dtype, for random values at replay."""

    def __init__(self, shape: tuple, dtype: Any) -> None:
        self.shape = shape
        self.dtype = dtype

    def make(self, torch: Any) -> Any:
        if self.dtype.is_floating_point or self.dtype.is_complex:
            return torch.randn(self.shape, dtype=self.dtype)
        if self.dtype == torch.bool:
            return torch.randint(0, 2, self.shape).bool()
        return torch.randint(0, 8, self.shape, dtype=self.dtype)


class Record:
    """One distinct call of an overload: its inputs' dtypes and shapes, how often, what it got."""

    def __init__(
        self,
        op: str,
        overload: str,
        dtypes: list[str],
        shapes: list[list[int]],
        args: tuple,
        kwargs: dict,
        written: tuple,
        not_comparable: str,
    ) -> None:
        self.op = op
        self.overload = overload
        self.dtypes = dtypes
        self.shapes = shapes
        self.args = args
        self.kwargs = kwargs
        self.written = written
        self.not_comparable = not_comparable
        self.dtype = ""
        self.count = 1
        self.synthetic = False

    def plan_entry(self) -> dict[str, Any]:
        """What the coverage_plan event says of it."""
        return {
            "op": self.op,
            "overload": self.overload,
            "dtypes": self.dtypes,
            "shapes": self.shapes,
            "count": self.count,
        }

    def sample(self, torch: Any) -> Sample:
        namespace, name = self.op.split("::", 1)
        overload = getattr(getattr(getattr(torch.ops, namespace), name), self.overload)

        def real(value: Any) -> Any:
            return value.make(torch) if isinstance(value, Synthetic) else value

        args, kwargs = torch.utils._pytree.tree_map(real, (self.args, self.kwargs))
        inputs = "synthesised of the recorded shapes" if self.synthetic else "recorded"
        return Sample(overload, args, kwargs, written=self.written, inputs=inputs)


def capture(
    torch: Any,
    run_dir: str,
    entry: str,
    args: list[str],
    steps: int,
    seconds: float,
    max_bytes: int = MAX_RECORDED_BYTES,
) -> tuple[list[Record], str]:
    """The records of one capture in a forked child, and how it stopped.

    Raises CaptureFailed when nothing was recorded.
    """
    workdir = os.path.join(run_dir, CAPTURE_DIR)
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    path = os.path.join(workdir, CAPTURE_FILE)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _child(torch, workdir, path, entry, args, steps, seconds, max_bytes)
    try:
        status = _wait(pid, seconds + CAPTURE_GRACE_S)
        if status is None:
            raise CaptureFailed(f"the entry did not stop within {seconds + CAPTURE_GRACE_S:g} s")
        if not os.path.exists(path):
            if os.WIFSIGNALED(status):
                raise CaptureFailed(
                    f"the capture process was killed by {signal.Signals(os.WTERMSIG(status)).name}"
                )
            raise CaptureFailed(f"the capture process exited with code {os.WEXITSTATUS(status)}")
        with open(path, "rb") as handle:
            saved = pickle.load(handle)  # noqa: S301 - written by our own child
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if not saved["records"]:
        raise CaptureFailed(saved["error"] or "the entry called no torch operators")
    how = saved["stopped"]
    if saved["error"]:
        how += f" (the entry failed after recording: {saved['error']})"
    return saved["records"], how


def _wait(pid: int, limit_s: float) -> int | None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def _child(
    torch: Any,
    workdir: str,
    path: str,
    entry: str,
    args: list[str],
    steps: int,
    seconds: float,
    max_bytes: int,
) -> None:
    code = 0
    try:
        # The entry's own tracking (workers.track in the built-in jobs) writes
        # here, not into the coverage run's events.jsonl or checkpoints.
        os.environ.update(
            {
                script_env.RUN_DIR: workdir,
                script_env.CHECKPOINT_DIR: os.path.join(workdir, "checkpoints"),
                script_env.DEVICE_TYPE: "cpu",
            }
        )
        recorder = _recorder(torch, max_bytes)
        stopped, error = "the entry ended", None

        def step_done(optimizer: Any, args: Any, kwargs: Any) -> None:
            recorder.steps += 1
            if recorder.steps >= steps:
                raise _Stop(f"after {recorder.steps} optimizer step(s)")

        def out_of_time(signum: int, frame: Any) -> None:
            raise _Stop(f"after {seconds:g} s")

        optimizers = importlib.import_module("torch.optim.optimizer")
        hook = optimizers.register_optimizer_step_post_hook(step_done)
        signal.signal(signal.SIGALRM, out_of_time)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            with recorder:
                exit_code = _run_entry(entry, args)
            if exit_code:
                error = f"the entry returned {exit_code}"
        except _Stop as stop:
            stopped = stop.why
        except SystemExit as exc:
            if exc.code not in (None, 0):
                error = f"the entry exited with code {exc.code}"
        except BaseException as exc:
            traceback.print_exc()
            error = traceback.format_exception_only(type(exc), exc)[-1].strip()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            hook.remove()
        records = recorder.finish()
        # pickle, not torch.save: torch.save cannot write a memory_format argument.
        with open(path + ".tmp", "wb") as handle:
            pickle.dump({"records": records, "error": error, "stopped": stopped}, handle, 4)
        os.replace(path + ".tmp", path)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _run_entry(entry: str, args: list[str]) -> int:
    from workers.training.launch import main as launch

    return launch([entry, *args])


def _recorder(torch: Any, max_bytes: int) -> Any:
    from torch.utils._python_dispatch import TorchDispatchMode

    plain = (type(None), bool, int, float, complex, str, torch.dtype, torch.device)
    plain += (torch.layout, torch.memory_format)

    class Recorder(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.records: dict[tuple, Record] = {}
            self.kept_bytes = 0
            self.steps = 0

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            kwargs = kwargs or {}
            if func.namespace in _NOT_KERNELS:
                return func(*args, **kwargs)
            flat = torch.utils._pytree.tree_flatten((args, kwargs))[0]
            tensors = [value for value in flat if isinstance(value, torch.Tensor)]
            key = (func, tuple((value.dtype, tuple(value.shape)) for value in tensors))
            record = self.records.get(key)
            if record is not None:
                record.count += 1
                return func(*args, **kwargs)
            # Inputs are kept before the call: an in-place op changes them.
            record = self._new(func, args, kwargs, tensors)
            output = func(*args, **kwargs)
            record.dtype = _principal_dtype(torch, tensors, output)
            self.records[key] = record
            return output

        def _new(self, func: Any, args: Any, kwargs: Any, tensors: list[Any]) -> Record:
            synthetic = []

            def keep(value: Any) -> Any:
                if isinstance(value, torch.Tensor):
                    size = value.numel() * value.element_size()
                    dense = value.layout == torch.strided and not value.is_quantized
                    if dense and value.device.type == "cpu" and self.kept_bytes + size <= max_bytes:
                        self.kept_bytes += size
                        return value.detach().clone()
                    synthetic.append(True)
                    return Synthetic(tuple(value.shape), value.dtype)
                # Generators and other objects do not travel; random ops are not compared.
                return value if isinstance(value, plain) else None

            kept_args, kept_kwargs = torch.utils._pytree.tree_map(keep, (tuple(args), dict(kwargs)))
            schema = func._schema
            record = Record(
                schema.name,
                func._overloadname,
                [dtype_name(value.dtype) for value in tensors],
                [list(value.shape) for value in tensors],
                kept_args,
                kept_kwargs,
                _written(schema, len(args)),
                _not_comparable(torch, func),
            )
            record.synthetic = bool(synthetic)
            return record

        def finish(self) -> list[Record]:
            return list(self.records.values())

    return Recorder()


def _written(schema: Any, positional: int) -> tuple:
    """Positions and names of the arguments the op writes into."""
    written: list[Any] = []
    for position, argument in enumerate(schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        written.append(position if position < positional else argument.name)
    return tuple(written)


def _not_comparable(torch: Any, func: Any) -> str:
    if torch.Tag.nondeterministic_seeded in func.tags:
        return "random output"
    if "empty" in func._schema.name or func._schema.name in _UNINITIALISED:
        return "uninitialised memory"
    return ""


def _principal_dtype(torch: Any, inputs: list[Any], output: Any) -> str:
    """The dtype a row of this call is listed under: its first floating input's, else its
    first input's, else (a factory) its output's."""
    floating = [
        value for value in inputs if value.dtype.is_floating_point or value.dtype.is_complex
    ]
    if floating:
        return dtype_name(floating[0].dtype)
    if inputs:
        return dtype_name(inputs[0].dtype)
    outputs = [
        value
        for value in torch.utils._pytree.tree_flatten(output)[0]
        if isinstance(value, torch.Tensor)
    ]
    return dtype_name(outputs[0].dtype) if outputs else "none"
