"""Training-health findings from the metric events a run already sends.

Nothing here needs the run to fail: NaN/Inf in a tracked loss, the loss scale
falling to its floor again and again (mixed precision overflowing), a loss spike
over ``SPIKE_FACTOR`` times its recent median, and a gradient norm of zero. Each
finding is reported once, at the step it was first seen.
"""

from __future__ import annotations

import collections
import math
import statistics

from workers.contract.diagnosis import GRAD_NORM_ZERO, LOSS_SCALE_FLOOR, LOSS_SPIKE, NAN_LOSS

SPIKE_FACTOR = 10.0
SPIKE_WINDOW = 50
# A spike is judged against a median of at least this many points.
SPIKE_MIN_POINTS = 10
# The loss scale at or under this value, this many times, is overflow again and again.
LOSS_SCALE_FLOOR_VALUE = 1.0
LOSS_SCALE_FLOOR_TIMES = 3
GRAD_NORM_ZERO_TIMES = 3


def _is_loss(key: str) -> bool:
    name = key.rsplit("/", 1)[-1].lower()
    return "loss" in name and "scale" not in name


def _is_loss_scale(key: str) -> bool:
    name = key.lower().replace("-", "_")
    return "loss_scale" in name or "lossscale" in name or name.endswith("/scale") or name == "scale"


def _is_grad_norm(key: str) -> bool:
    name = key.lower().replace("-", "_")
    return "grad_norm" in name or "gradnorm" in name or "grad/norm" in name


class HealthWatch:
    """Feed it metric points; ``findings`` lists what it saw; ``first_nan`` for stop_on_nan."""

    def __init__(self) -> None:
        self.findings: list[dict] = []
        self._named: set = set()
        self._recent: dict[str, collections.deque[float]] = {}
        self._floor_hits: dict[str, int] = {}
        self._zero_hits: dict[str, int] = {}
        self.first_nan: dict | None = None

    def _find(self, name: str, key: str, step: int, message: str) -> dict | None:
        if (name, key) in self._named:
            return None
        self._named.add((name, key))
        finding = {"name": name, "key": key, "step": step, "message": message}
        self.findings.append(finding)
        return finding

    def metric(self, key: str, step: int, value: float | None, nonfinite: str = "") -> dict | None:
        """One point; returns the finding it caused, if it is a new one."""
        if _is_loss(key):
            if value is None or not math.isfinite(value):
                shown = nonfinite or ("NaN" if value is None or value != value else str(value))
                finding = self._find(NAN_LOSS, key, step, f"{key} is {shown} at step {step}")
                if finding is not None and self.first_nan is None:
                    self.first_nan = finding
                return finding
            recent = self._recent.setdefault(key, collections.deque(maxlen=SPIKE_WINDOW))
            found = None
            if len(recent) >= SPIKE_MIN_POINTS:
                median = statistics.median(recent)
                if median > 0 and value > SPIKE_FACTOR * median:
                    found = self._find(
                        LOSS_SPIKE,
                        key,
                        step,
                        f"{key} jumped to {value:g} at step {step}, over {SPIKE_FACTOR:g}x its "
                        f"recent median {median:g}",
                    )
            recent.append(value)
            return found
        if value is None:
            return None
        if _is_loss_scale(key) and value <= LOSS_SCALE_FLOOR_VALUE:
            self._floor_hits[key] = self._floor_hits.get(key, 0) + 1
            if self._floor_hits[key] >= LOSS_SCALE_FLOOR_TIMES:
                return self._find(
                    LOSS_SCALE_FLOOR,
                    key,
                    step,
                    f"{key} fell to its floor ({value:g}) {self._floor_hits[key]} times by step "
                    f"{step}: mixed precision keeps overflowing",
                )
        if _is_grad_norm(key) and value == 0:
            self._zero_hits[key] = self._zero_hits.get(key, 0) + 1
            if self._zero_hits[key] >= GRAD_NORM_ZERO_TIMES:
                return self._find(
                    GRAD_NORM_ZERO,
                    key,
                    step,
                    f"{key} is zero at step {step}: nothing is learning (frozen parameters, "
                    "a detached loss, or gradients lost to overflow)",
                )
        return None

    def event(self, event: dict) -> dict | None:
        """A metric event of events.jsonl."""
        if event.get("type") != "metric":
            return None
        step = event.get("step")
        value = event.get("value")
        if not isinstance(step, int) or not isinstance(event.get("key"), str):
            return None
        if value is not None and not isinstance(value, (int, float)):
            return None
        return self.metric(event["key"], step, value, str(event.get("nonfinite") or ""))
