"""The verdict of a stability run, from its interval records: pass, warn or fail, and why.

- fail: a consistency mismatch (silent data corruption), a device that failed
  under load, a throughput drop past ``fail_drop_pct``; the device is named
  in ``bad_devices`` and the platform marks it bad;
- warn: a throughput drop past ``warn_drop_pct`` (throttling), a temperature
  above ``max_temperature_c``;
- pass: none of these.

A drop is measured per device against the median of its first
``BASELINE_INTERVALS`` intervals, at the worst later interval. Pure Python.
"""

from __future__ import annotations

import statistics
from typing import Any

from workers.kinds.stability import (
    BASELINE_INTERVALS,
    CONSISTENCY_MISMATCH,
    DEVICE_FAULT,
    ERROR,
    FAIL,
    MISMATCH,
    PASS,
    THROUGHPUT_DROP,
    WARN,
)


def drop_pct(throughputs: list[float]) -> float | None:
    """How far (in %) the worst interval after the first ones fell below them; None
    while there is nothing after them to compare."""
    if len(throughputs) <= BASELINE_INTERVALS:
        return None
    baseline = statistics.median(throughputs[:BASELINE_INTERVALS])
    if baseline <= 0:
        return None
    worst = min(throughputs[BASELINE_INTERVALS:])
    return max(0.0, (baseline - worst) / baseline * 100.0)


def judge(
    records: list[dict[str, Any]],
    warn_drop_pct: float,
    fail_drop_pct: float,
    max_temperature_c: float,
) -> dict[str, Any]:
    """``verdict``, ``reasons`` (worst first), ``bad_devices``, ``cause`` and per-device numbers.

    ``records`` are the interval events' fields (interval, device, throughput,
    consistency, error, telemetry), in the order they were measured.
    """
    fails: list[str] = []
    warns: list[str] = []
    bad: dict[int, str] = {}
    causes: list[str] = []
    by_device: dict[int, list[dict[str, Any]]] = {}
    for record in records:
        by_device.setdefault(record["device"], []).append(record)

    for device, mine in sorted(by_device.items()):
        for record in mine:
            if record["consistency"] == MISMATCH:
                detail = record.get("detail") or "its result changed"
                reason = (
                    f"consistency mismatch on device {device} at interval {record['interval']}: "
                    f"{detail} (silent data corruption)"
                )
                fails.append(reason)
                bad.setdefault(device, reason)
                causes.append(CONSISTENCY_MISMATCH)
                break
        for record in mine:
            if record["consistency"] == ERROR:
                when = (
                    f"at interval {record['interval']}"
                    if record["interval"]
                    else "while its workload was set up"
                )
                reason = f"device {device} failed {when}: {record.get('error') or 'unknown error'}"
                fails.append(reason)
                bad.setdefault(device, reason)
                causes.append(DEVICE_FAULT)
                break

    drops: dict[str, float] = {}
    for device, mine in sorted(by_device.items()):
        values = [r["throughput"] for r in mine if r.get("throughput") is not None]
        drop = drop_pct(values)
        if drop is None:
            continue
        drops[str(device)] = round(drop, 2)
        where = f"throughput of device {device} dropped {drop:.0f} % below its first intervals'"
        if drop > fail_drop_pct:
            reason = f"{where} (fail above {fail_drop_pct:g} %)"
            fails.append(reason)
            bad.setdefault(device, reason)
            causes.append(THROUGHPUT_DROP)
        elif drop > warn_drop_pct:
            warns.append(f"{where} (warn above {warn_drop_pct:g} %): throttling?")

    hottest: dict[str, float] = {}
    for device, mine in sorted(by_device.items()):
        temperatures = [
            (r["telemetry"]["temperature_c"], r["interval"])
            for r in mine
            if isinstance(r.get("telemetry"), dict) and "temperature_c" in r["telemetry"]
        ]
        if not temperatures:
            continue
        peak, interval = max(temperatures)
        hottest[str(device)] = peak
        if max_temperature_c and peak > max_temperature_c:
            warns.append(
                f"device {device} reached {peak:g} °C at interval {interval} "
                f"(limit {max_temperature_c:g} °C)"
            )

    verdict = FAIL if fails else WARN if warns else PASS
    return {
        "verdict": verdict,
        "reasons": fails + warns,
        "bad_devices": [{"device": d, "reason": r} for d, r in sorted(bad.items())],
        "cause": causes[0] if causes else "",
        "throughput_drop_pct": drops,
        "max_temperature_c": hottest,
    }
