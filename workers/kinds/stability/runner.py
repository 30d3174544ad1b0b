"""The stability run: keep every leased device busy, and every interval record how fast
it went, what its telemetry said and whether a fixed computation still gives the same result.

One thread per device runs the workload until the interval's end (torch
releases the GIL in its kernels, so the devices work at once); a telemetry
thread samples the devices in the middle of the interval, under load. Then
each device repeats the consistency check, and one ``interval`` event per
device is written. A device that fails ends the run early. The verdict
(``verdict.judge``) is the result's summary.
"""

from __future__ import annotations

import os
import signal
import statistics
import threading
import time
from typing import Any

from workers.backends import BackendError
from workers.contract import exits
from workers.contract.devices import CPU
from workers.kinds.base import Outcome, RunContext
from workers.kinds.stability import (
    ERROR,
    FAIL,
    FAULTS_ENV,
    INTERVAL,
    MISMATCH,
    PASS,
    WORKLOADS,
    Faults,
    FaultSyntaxError,
    consistency,
    parse_faults,
    plan,
    verdict,
    workloads,
)
from workers.telemetry import sample as sample_telemetry

# Iterations between synchronizations: the queue of an asynchronous device stays short,
# so an interval's work is done within it.
SYNC_EVERY = 8


def run(ctx: RunContext) -> Outcome:
    spec = ctx.spec
    injected = "; ".join(text for text in (spec["faults"], os.environ.get(FAULTS_ENV, "")) if text)
    try:
        # The spec's were checked on submission; the variable's are checked here.
        faults = parse_faults(injected)
    except FaultSyntaxError as exc:
        return Outcome(exits.FAILED, f"{FAULTS_ENV}: {exc}", cause=exits.JOB_ERROR)
    if faults:
        ctx.say(f"fault injection is on: {injected}")

    backend = ctx.backend
    try:
        backend.load()
    except BackendError as exc:
        return _unusable(str(exc))
    count = backend.device_count() if backend.is_available() else 0
    devices = spec["devices"]
    if count < devices:
        return _unusable(f"the run needs {devices} {backend.name} device(s); torch sees {count}")
    torch = backend.torch
    duration, interval_s, intervals = plan(spec)
    size = spec["size"] or workloads.default_size(spec["workload"], backend.name == CPU)
    rtol = consistency.rtol_for(spec["dtype"], spec["rtol"])
    physical = visible_indices(backend.visible_devices_env, devices)
    ctx.say(
        f"stability: {spec['workload']} {spec['dtype']} size {size} on {devices} × "
        f"{backend.device_name(0)}, {duration:g} s in {intervals} intervals of {interval_s:g} s"
    )

    loads: dict[int, workloads.Workload] = {}
    try:
        for device in range(devices):
            loads[device] = workloads.build(
                spec["workload"], torch, backend.device(device), spec["dtype"], size, spec["seed"]
            )
            loads[device].step()  # warm-up: kernel selection and allocation happen here
            backend.synchronize(device)
    except workloads.WorkloadError as exc:
        return Outcome(exits.FAILED, str(exc), cause=exits.JOB_ERROR)
    except Exception as exc:
        if spec["workload"] not in WORKLOADS:
            # A user's function that breaks at once is its author's to fix, not the device's.
            why = f"the workload {spec['workload']} failed on its first call: {_text(exc)}"
            return Outcome(exits.FAILED, why, cause=exits.JOB_ERROR)
        setup = [{"interval": 0, "device": len(loads), "consistency": ERROR, "error": _text(exc)}]
        return _finish(ctx, setup, 0, intervals, loads, size)

    references: dict[int, Any] = {}
    records: list[dict[str, Any]] = []
    start = time.monotonic()
    for number in range(1, intervals + 1):
        if faults.die(number):
            ctx.say(f"fault injection: the run's process dies at interval {number}")
            os.kill(os.getpid(), signal.SIGKILL)
        deadline = start + min(duration, number * interval_s)
        found = run_interval(ctx, loads, number, deadline, faults, physical)
        results: dict[int, Any] = {}
        for device, measured in found.items():
            if measured["error"]:
                continue
            try:
                result = loads[device].probe()
            except Exception as exc:
                measured["error"] = _text(exc)
                continue
            if faults.mismatch(number, device):
                result = consistency.perturb(result)
            results[device] = result
        outcomes = consistency.check_interval(torch, references, results, rtol)
        for device in sorted(found):
            measured = found[device]
            checked = outcomes.get(
                device, {"consistency": ERROR, "max_rel_err": None, "detail": ""}
            )
            record = {
                "interval": number,
                "device": device,
                "seconds": round(measured["seconds"], 4),
                "iterations": measured["iterations"],
                "throughput": measured["throughput"],
                "unit": loads[device].unit,
                "consistency": checked["consistency"],
                "max_rel_err": checked["max_rel_err"],
                "health": measured["health"],
                "telemetry": measured["telemetry"],
                "error": measured["error"],
            }
            ctx.events.emit(INTERVAL, **record)
            records.append(dict(record, detail=checked["detail"]))
        ctx.say(_interval_line(number, intervals, [r for r in records if r["interval"] == number]))
        # The verdict is a fail already: hours more of load would add nothing to it.
        if any(r["consistency"] in (ERROR, MISMATCH) for r in records if r["interval"] == number):
            ctx.say(f"stopping after interval {number}: a device failed its check")
            break
    return _finish(ctx, records, len({r["interval"] for r in records}), intervals, loads, size)


def run_interval(
    ctx: RunContext,
    loads: dict[int, workloads.Workload],
    number: int,
    deadline: float,
    faults: Faults,
    physical: list[int],
) -> dict[int, dict[str, Any]]:
    """Every device works until ``deadline``; its telemetry is sampled halfway."""
    backend = ctx.backend
    found: dict[int, dict[str, Any]] = {}
    threads = []
    for device, load in loads.items():
        found[device] = {"iterations": 0, "seconds": 0.0, "throughput": None, "error": ""}
        fail = faults.error(number, device)
        slowdown = faults.slowdown(number, device)
        thread = threading.Thread(
            target=_work,
            args=(backend, device, load, deadline, slowdown, fail, found[device]),
            daemon=True,
        )
        threads.append(thread)
        thread.start()
    halfway = time.monotonic() + max(0.0, deadline - time.monotonic()) / 2
    time.sleep(max(0.0, halfway - time.monotonic()))
    samples = telemetry(backend.name, physical)
    for thread in threads:
        thread.join()
    for device in found:
        sample = samples.get(physical[device], {})
        found[device]["telemetry"] = dict(sample.get("readings") or {})
        found[device]["health"] = str(sample.get("health") or "")
        if sample.get("error"):
            found[device]["telemetry_error"] = sample["error"]
    return found


def _work(
    backend: Any,
    device: int,
    load: workloads.Workload,
    deadline: float,
    slowdown: float,
    fail: bool,
    into: dict[str, Any],
) -> None:
    """One device's share of an interval; what it did goes to ``into``."""
    started = time.monotonic()
    iterations = 0
    flops = 0.0
    counted = True
    try:
        if fail:
            raise RuntimeError(f"injected device error ({FAULTS_ENV})")
        chunk_started = started
        while time.monotonic() < deadline or iterations == 0:
            done = load.step()
            iterations += 1
            if done is None:
                counted = False
            else:
                flops += done
            if iterations % SYNC_EVERY == 0 or slowdown < 1.0:
                backend.synchronize(device)
                if slowdown < 1.0:
                    # A slower device: the same work takes 1/slowdown as long.
                    now = time.monotonic()
                    time.sleep((now - chunk_started) * (1.0 / slowdown - 1.0))
                chunk_started = time.monotonic()
        backend.synchronize(device)
    except Exception as exc:
        into["error"] = _text(exc)
    seconds = time.monotonic() - started
    into["iterations"] = iterations
    into["seconds"] = seconds
    if not into["error"] and seconds > 0:
        into["throughput"] = flops / seconds / 1e12 if counted else iterations / seconds


def telemetry(device_type: str, physical: list[int]) -> dict[int, dict[str, Any]]:
    """Contract samples (workers.contract.telemetry) of the devices, by host index; a tool
    that fails gives samples with ``error`` and no readings, never an exception."""
    samples = sample_telemetry(device_type, physical)
    return {s["index"]: s for s in samples if s.get("index") is not None}


def visible_indices(variable: str | None, devices: int) -> list[int]:
    """The host's indices of the run's devices: what the lease made visible, in order."""
    value = os.environ.get(variable, "") if variable else ""
    try:
        indices = [int(item) for item in value.split(",") if item.strip()]
    except ValueError:
        indices = []
    if len(indices) < devices:
        return list(range(devices))
    return indices[:devices]


def _finish(
    ctx: RunContext,
    records: list[dict[str, Any]],
    done: int,
    planned: int,
    loads: dict[int, workloads.Workload],
    size: int,
) -> Outcome:
    spec = ctx.spec
    judged = verdict.judge(
        records, spec["warn_drop_pct"], spec["fail_drop_pct"], spec["max_temperature_c"]
    )
    totals: dict[int, float] = {}
    for record in records:
        if record.get("throughput") is not None:
            totals[record["interval"]] = totals.get(record["interval"], 0.0) + record["throughput"]
    series = [totals[number] for number in sorted(totals)]
    units = {load.unit for load in loads.values()}
    summary: dict[str, Any] = {
        "verdict": judged["verdict"],
        "reasons": judged["reasons"],
        "bad_devices": judged["bad_devices"],
        "intervals": done,
        "planned_intervals": planned,
        "workload": spec["workload"],
        "dtype": spec["dtype"],
        "size": size,
        "devices": spec["devices"],
        "unit": units.pop() if len(units) == 1 else "",
        "mismatches": sum(1 for r in records if r["consistency"] == MISMATCH),
        "throughput_drop_pct": judged["throughput_drop_pct"],
        "max_temperature_c": judged["max_temperature_c"],
    }
    injected = "; ".join(t for t in (spec["faults"], os.environ.get(FAULTS_ENV, "")) if t)
    if injected:
        summary["injected_faults"] = injected
    if series:
        summary["throughput"] = round(statistics.median(series), 6)
        summary["throughput_first"] = round(series[0], 6)
        summary["throughput_last"] = round(series[-1], 6)
    if judged["throughput_drop_pct"]:
        summary["worst_drop_pct"] = max(judged["throughput_drop_pct"].values())
    if judged["max_temperature_c"]:
        summary["peak_temperature_c"] = max(judged["max_temperature_c"].values())
    for reason in judged["reasons"]:
        ctx.say(f"{judged['verdict']}: {reason}")
    if judged["verdict"] == FAIL:
        return Outcome(exits.FAILED, judged["reasons"][0], summary, judged["cause"])
    if judged["verdict"] == PASS:
        reason = f"pass: {done} intervals, every consistency check held"
    else:
        reason = "warn: " + judged["reasons"][0]
    return Outcome(exits.SUCCEEDED, reason, summary)


def _unusable(why: str) -> Outcome:
    """The stack cannot run at all: a fail, but no device of it is to blame."""
    summary = {"verdict": FAIL, "reasons": [why], "bad_devices": [], "intervals": 0}
    return Outcome(exits.FAILED, why, summary)


def _interval_line(number: int, intervals: int, records: list[dict[str, Any]]) -> str:
    parts = []
    for record in records:
        speed = record["throughput"]
        shown = f"{speed:.4g} {record['unit']}" if speed is not None else "no throughput"
        parts.append(f"device {record['device']} {shown} {record['consistency']}")
    return f"interval {number}/{intervals}: " + "; ".join(parts)


def _text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:2000]
