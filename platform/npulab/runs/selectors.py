"""Read paths for runs shared by the pages and the API."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from npulab.runs.models import Run, RunEvent

LOG_TAIL_LINES = 200


def can_cancel(user: AbstractBaseUser | AnonymousUser, run: Run) -> bool:
    return bool(user.is_authenticated and (user.is_staff or run.submitted_by_id == user.pk))


def metric_series(run: Run, key: str) -> list[list[float | int | None]]:
    """All points of one metric in step order, as [step, value] pairs."""
    return [
        [step, value]
        for step, value in run.metrics.filter(key=key)
        .order_by("step", "id")
        .values_list("step", "value")
    ]


def log_tail(run: Run, lines: int = LOG_TAIL_LINES) -> list[RunEvent]:
    """The last ``lines`` log events, oldest first."""
    newest = RunEvent.objects.filter(run=run, type="log").order_by("-id")[:lines]
    return list(reversed(newest))


def steps(run: Run) -> list[RunEvent]:
    return list(RunEvent.objects.filter(run=run, type="step").order_by("id"))
