"""The coverage run: every op × dtype of the op set on the device, against a reference.

This process plans the cases, forks the children that run them (pool.py)
and writes the events; it never runs an op itself, so no op can take it
down. The plan comes first (``coverage_plan``: how many rows the run will
report), then one ``op_result`` per row as soon as it is known, then the
outcome: succeeded when the matrix is complete, whatever the ops did.
"""

from __future__ import annotations

import inspect
import os
import sys
import time
from typing import Any, Callable

from workers.backends import BackendError
from workers.contract import exits
from workers.kinds.base import Outcome, RunContext
from workers.kinds.coverage import (
    CAPTURE_FAILED,
    COVERAGE_PLAN,
    ERROR,
    FORWARD,
    LIST,
    MODEL,
    OP_DB_UNAVAILABLE,
    OP_RESULT,
    PASS,
    STATUSES,
)
from workers.kinds.coverage import opinfo as opinfos
from workers.kinds.coverage.capture import CaptureFailed, capture
from workers.kinds.coverage.cases import Case, plan_model, plan_opinfo
from workers.kinds.coverage.execute import Environment, execute
from workers.kinds.coverage.pool import Pool, Report

# CPU runs use at most this many children: beyond it they only share the same cores.
MAX_CPU_PROCESSES = 4
# A progress line every this many results.
PROGRESS_EVERY = 500


def run(ctx: RunContext) -> Outcome:
    spec = ctx.spec
    started = time.monotonic()
    try:
        # Imports only: the device is first touched in the children (a forked
        # process must not inherit an initialised CUDA or NPU runtime).
        ctx.backend.load()
    except BackendError as exc:
        return Outcome(exits.FAILED, str(exc))
    torch = ctx.backend.torch
    plan_ops: list[dict[str, Any]] | None = None
    unknown: list[str] = []
    if spec["op_set"] == MODEL:
        try:
            records, how = capture(
                torch,
                ctx.run_dir,
                spec["entry"],
                spec["args"],
                spec["capture_steps"],
                spec["capture_s"],
            )
        except CaptureFailed as exc:
            return Outcome(exits.FAILED, str(exc), cause=CAPTURE_FAILED)
        ctx.say(f"coverage: recorded {len(records)} distinct op calls of {spec['entry']}, {how}")
        cases = plan_model(records, spec["dtypes"])
        plan_ops = [record.plan_entry() for record in records]
    else:
        try:
            op_db = opinfos.load_op_db()
        except opinfos.OpDbUnavailable as exc:
            return Outcome(exits.FAILED, str(exc), cause=OP_DB_UNAVAILABLE)
        opinfos.skip_test_lookup()
        if spec["op_set"] == LIST:
            ops, unknown = opinfos.resolve(spec["ops"], op_db)
        else:
            ops = op_db
        ops = opinfos.select(ops, spec["include"], spec["exclude"])
        cases = plan_opinfo(torch, ops, spec["device_type"], spec["dtypes"], spec["backward"])

    unknown_rows = [(name, dtype) for name in unknown for dtype in (spec["dtypes"] or [""])]
    total = len(cases) + len(unknown_rows)
    plan: dict[str, Any] = {"op_set": spec["op_set"], "total": total}
    if plan_ops is not None:
        plan["ops"] = plan_ops
    ctx.events.emit(COVERAGE_PLAN, **plan)
    tally = Tally(ctx, total)
    for name, dtype in unknown_rows:
        row = {"op": name, "variant": "", "dtype": dtype, "pass": FORWARD}
        error = f"{name!r} is not in the operator database (op_db) nor a module:attr OpInfo"
        tally.emit(row, {"status": ERROR, "error": error, "samples": 0, "detail": {}})

    processes = _processes(spec)
    ctx.say(
        f"coverage: {len(cases)} cases on {spec['device_type']}, {processes} process(es), "
        f"batches of {spec['batch_size']}"
    )
    pool = Pool(
        processes,
        spec["batch_size"],
        spec["op_timeout_s"],
        _setup(ctx, processes),
        lambda case, result: tally.emit(case.row(), result),
    )
    pool.run(cases)
    seconds = time.monotonic() - started
    summary = tally.summary(spec["op_set"], seconds)
    reason = (
        f"{summary['total']} results, {summary['pass']} pass "
        f"({summary['pass_rate']:.1%}) in {seconds:.1f} s"
    )
    return Outcome(exits.SUCCEEDED, reason, summary)


def _processes(spec: dict[str, Any]) -> int:
    if spec["processes"]:
        return spec["processes"]
    if spec["device_type"] == "cpu":
        return max(1, min(MAX_CPU_PROCESSES, os.cpu_count() or 1))
    return spec["devices"]


def _setup(ctx: RunContext, processes: int) -> Callable[[int, Report], Callable[[Case], dict]]:
    """What a fresh child does first: its threads, its device, its environment."""
    backend, spec = ctx.backend, ctx.spec

    def setup(slot: int, report: Report) -> Callable[[Case], dict]:
        torch = backend.torch
        _cache_frames_without_source()
        if processes > 1:
            torch.set_num_threads(1)  # children share the cores; oversubscribed they crawl
        # TORCH_WARN_ONCE warnings (a CPU fallback's among them) every time, not once a process.
        torch.set_warn_always(True)
        index = slot % max(1, spec["devices"])
        if backend.name != "cpu":
            getattr(torch, backend.name).set_device(index)
        env = Environment(
            torch,
            backend.device(index),
            backend.synchronize,
            spec["seed"],
            spec["samples"] == "all",
            report,
        )
        return lambda case: execute(case, env)

    return setup


def _cache_frames_without_source() -> None:
    """Tell inspect which module each frame below us is, where it cannot find out itself.

    OpInfo's sample functions call ``inspect.stack()`` on every case. For a
    frame whose file does not exist (``<frozen runpy>`` under ``python -m``)
    ``inspect.getmodule`` scans every module in sys.modules, every time: that
    made a case ten times slower than the op itself. ``opinfos.skip_test_lookup``
    now spares OpInfo's own calls where it can; any left (a torch that looks
    elsewhere, a user's sample function) stay this cheap.
    """
    frame = sys._getframe()
    while frame is not None:
        name = frame.f_code.co_filename
        if not os.path.exists(name):
            module = frame.f_globals.get("__name__", "")
            inspect.modulesbyfile[name] = module
            inspect.modulesbyfile[os.path.normcase(os.path.abspath(name))] = module
        frame = frame.f_back


class Tally:
    """Writes the op_result rows and counts them for the summary."""

    def __init__(self, ctx: RunContext, total: int) -> None:
        self.ctx = ctx
        self.total = total
        self.counts = dict.fromkeys(STATUSES, 0)
        self.ops: set[tuple[str, str]] = set()
        self.dtypes: set[str] = set()

    def emit(self, row: dict[str, str], result: dict[str, Any]) -> None:
        fields = dict(row)
        fields.update(
            status=result["status"],
            error=result.get("error"),
            max_abs_err=_finite(result.get("max_abs_err")),
            max_rel_err=_finite(result.get("max_rel_err")),
            seconds=round(float(result.get("seconds") or 0.0), 6),
            samples=int(result.get("samples") or 0),
            detail=_json_safe(result.get("detail") or {}),
        )
        self.ctx.events.emit(OP_RESULT, **fields)
        self.counts[result["status"]] += 1
        self.ops.add((row["op"], row["variant"]))
        if row["dtype"]:
            self.dtypes.add(row["dtype"])
        done = sum(self.counts.values())
        if done % PROGRESS_EVERY == 0 and done < self.total:
            self.ctx.say(f"coverage: {done}/{self.total} results, {self.counts[PASS]} pass")

    def summary(self, op_set: str, seconds: float) -> dict[str, Any]:
        total = sum(self.counts.values())
        summary: dict[str, Any] = {"total": total, **self.counts}
        summary.update(
            pass_rate=round(self.counts[PASS] / total, 6) if total else 0.0,
            ops=len(self.ops),
            dtypes=sorted(self.dtypes),
            op_set=op_set,
            seconds=round(seconds, 3),
            pairs_per_s=round(total / seconds, 3) if seconds > 0 else 0.0,
        )
        return summary


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if value == value and value not in (float("inf"), float("-inf")) else None


def _json_safe(value: Any) -> Any:
    """Detail as JSON takes it: no NaN or infinity (EventWriter refuses them), no tuples."""
    if isinstance(value, dict):
        return {str(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    if isinstance(value, float):
        return _finite(value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)
