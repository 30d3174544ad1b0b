"""What the dashboard answers first thing in the morning: what runs, what failed and why,
how long the queue is, and whether the hosts and their stacks are fine.

Plain functions over querysets the caller has already narrowed to what the user may see.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from statistics import median

from django.db.models import QuerySet
from django.utils import timezone

from npulab.runs.models import Run
from npulab.runs.selectors import Progress, progress
from npulab.snapshots.models import Snapshot
from workers.contract.diagnosis import CATEGORIES

FAILURE_WINDOW = timedelta(hours=24)
# Enough to see what is going on without turning the dashboard into the run list.
SHOWN_IN_PROGRESS = 10
SHOWN_FAILURES_PER_GROUP = 5
SHOWN_SNAPSHOTS = 6
# Queue waits are taken over the runs dispatched in this window: recent enough to be today's
# queue, long enough to hold more than a handful of runs.
QUEUE_WINDOW = timedelta(hours=24)
FAILED = (Run.Status.FAILED, Run.Status.LOST)


@dataclass
class RunInProgress:
    run: Run
    progress: Progress | None


@dataclass
class FailureGroup:
    """Failed runs that share a cause: the category a user fixes once for all of them."""

    category: str
    label: str
    count: int = 0
    runs: list[Run] = field(default_factory=list)


@dataclass
class QueueWait:
    queued: int
    p50_wait_s: float | None
    oldest: Run | None
    oldest_wait_s: float | None


def failure_category(run: Run) -> tuple[str, str]:
    """The category a failed run is grouped by, and its label: its diagnosis's category
    (docs/diagnosis.md) where it has one, else its cause as recorded."""
    category = (run.diagnosis or {}).get("category")
    if category in CATEGORIES:
        return category, f"{category}: {CATEGORIES[category]}"
    if run.exit_cause:
        return run.exit_cause, run.exit_cause_label
    return "unknown", "No cause recorded"


def in_progress(runs: QuerySet[Run], limit: int = SHOWN_IN_PROGRESS) -> list[RunInProgress]:
    """Running and dispatched runs, the longest-running first, each with its progress."""
    active = runs.filter(status__in=(Run.Status.RUNNING, Run.Status.DISPATCHED))
    chosen = active.select_related("host", "project").order_by("started_at", "pk")[:limit]
    return [RunInProgress(run, progress(run)) for run in chosen]


def failures(
    runs: QuerySet[Run], now: datetime | None = None, window: timedelta = FAILURE_WINDOW
) -> list[FailureGroup]:
    """The window's failed runs grouped by category, the largest group first."""
    since = (now or timezone.now()) - window
    failed = runs.filter(status__in=FAILED, finished_at__gte=since).select_related("host")
    groups: dict[str, FailureGroup] = {}
    for run in failed.order_by("-finished_at"):
        category, label = failure_category(run)
        group = groups.setdefault(category, FailureGroup(category, label))
        group.count += 1
        if len(group.runs) < SHOWN_FAILURES_PER_GROUP:
            group.runs.append(run)
    return sorted(groups.values(), key=lambda group: (-group.count, group.category))


def queue_wait(
    runs: QuerySet[Run], now: datetime | None = None, window: timedelta = QUEUE_WINDOW
) -> QueueWait:
    """The median wait of the window's dispatched runs, and the run waiting longest now."""
    now = now or timezone.now()
    queued = runs.filter(status=Run.Status.QUEUED)
    oldest = queued.order_by("created", "pk").first()
    dispatched = runs.filter(dispatched_at__gte=now - window).values_list(
        "created", "dispatched_at"
    )
    waits = [(sent - created).total_seconds() for created, sent in dispatched]
    return QueueWait(
        queued=queued.count(),
        p50_wait_s=median(waits) if waits else None,
        oldest=oldest,
        oldest_wait_s=(now - oldest.created).total_seconds() if oldest else None,
    )


def newest_snapshots(limit: int = SHOWN_SNAPSHOTS) -> list[Snapshot]:
    """The snapshots seen most recently, each with its host and whether it is known good."""
    return list(Snapshot.objects.select_related("host").order_by("-last_seen")[:limit])
