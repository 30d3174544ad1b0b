"""What every run kind's runner gets and gives back."""

from __future__ import annotations

import sys
import time
import traceback
from typing import Any, Callable

from workers.backends import Backend
from workers.contract import exits, kinds
from workers.contract.events import FAIL, PASS, RUNNER, SKIP, STEP_STARTED
from workers.events import EventWriter


class RunContext:
    """Everything a runner may use: its spec, its device backend, its events file."""

    def __init__(self, spec: dict[str, Any], backend: Backend, events: EventWriter, run_dir: str):
        self.spec = spec
        self.backend = backend
        self.events = events
        self.run_dir = run_dir

    def say(self, line: str) -> None:
        """A log line from the runner itself (not the program it runs)."""
        self.events.log(RUNNER, line)


class Outcome:
    """How a run ended, as the runner sees it."""

    def __init__(
        self,
        status: str,
        reason: str = "",
        summary: dict[str, Any] | None = None,
        cause: str = "",
    ):
        if status not in exits.RESULT_STATUSES:
            raise ValueError(f"a run ends {' or '.join(exits.RESULT_STATUSES)}, not {status!r}")
        # A cause the platform does not know would be recorded as something
        # else: refuse it here, where a test sees it.
        if cause not in kinds.causes():
            raise ValueError(f"unknown exit cause {cause!r}: declare it in the kind's causes")
        self.status = status
        self.reason = reason
        self.summary = summary or {}
        # Why a failed run ended, when the runner knows better than the exit
        # code (workers.contract.exits and the kind's own causes).
        self.cause = cause

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reason": self.reason,
            "summary": self.summary,
            "cause": self.cause,
        }


class StepFailed(Exception):
    """A step ran and its check did not hold; ``detail`` is kept with the failure."""

    def __init__(self, message: str, detail: dict[str, Any] | None = None):
        super().__init__(message)
        self.detail = detail or {}


class StepRecorder:
    """Runs named steps in order, timing each and writing one ``step`` event per step.

    A step is a callable returning a detail dict. It fails by raising
    StepFailed (a check did not hold) or any other exception (it broke; the
    traceback goes to stderr). Steps listed in ``requires`` that did not
    pass make a step skip instead of run. A ``step_started`` event goes out
    before each body runs, so the platform can say which step is running now.
    """

    def __init__(self, events: EventWriter):
        self.events = events
        self.statuses: dict[str, str] = {}
        self.errors: list[str] = []

    def run(
        self,
        name: str,
        body: Callable[[], dict[str, Any]],
        requires: tuple = (),
    ) -> dict[str, Any]:
        blocked = [dep for dep in requires if self.statuses.get(dep) != PASS]
        if blocked:
            self._record(name, SKIP, 0.0, {}, "skipped: " + ", ".join(blocked) + " did not pass")
            return {}
        self.events.emit(STEP_STARTED, name=name)
        # A step may run for minutes without another event: a buffering writer must not
        # hold back the news that it began.
        self.events.flush()
        started = time.perf_counter()
        try:
            detail = body() or {}
        except StepFailed as exc:
            self._record(name, FAIL, time.perf_counter() - started, exc.detail, str(exc))
            return exc.detail
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            error = f"{type(exc).__name__}: {exc}"
            self._record(name, FAIL, time.perf_counter() - started, {}, error)
            return {}
        self._record(name, PASS, time.perf_counter() - started, detail, None)
        return detail

    def _record(
        self, name: str, status: str, seconds: float, detail: dict[str, Any], error: str | None
    ) -> None:
        self.statuses[name] = status
        if error and status == FAIL:
            self.errors.append(f"{name}: {error}")
        self.events.step(name, status, seconds, detail=detail, error=error)

    def outcome(self, summary: dict[str, Any]) -> Outcome:
        summary = dict(summary, steps=dict(self.statuses))
        if all(status == PASS for status in self.statuses.values()):
            return Outcome(exits.SUCCEEDED, "all steps passed", summary)
        failed = [name for name, status in self.statuses.items() if status != PASS]
        reason = self.errors[0] if self.errors else "steps did not pass: " + ", ".join(failed)
        return Outcome(exits.FAILED, reason, summary)
