"""Read paths for runs shared by the pages and the API."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from time import monotonic
from typing import Any

from django.core.paginator import Page, Paginator
from django.utils import timezone

from npulab.hosts.models import Host
from npulab.projects.models import Project
from npulab.runs import capabilities
from npulab.runs.access import visible_runs
from npulab.runs.kinds import get as get_kind
from npulab.runs.models import Run, RunAttempt, RunEvent
from npulab.series import reads
from npulab.series.models import MetricSeries
from npulab.snapshots.diff import version_changes
from npulab.snapshots.models import Snapshot
from workers.contract.capture import PARAM, SOURCES, TAG, TRACK
from workers.contract.events import STEP
from workers.contract.ranks import key_rank

LOG_TAIL_LINES = 200
LOG_PAGE_LINES = 500
MAX_LOG_QUERY = 200
# A search scans a long log a window of lines at a time until its page is full or its time
# is up (log_hits): a window takes well under that time on PostgreSQL and on SQLite
# (bench/log_page.py).
LOG_SCAN_LINES = 100_000
LOG_SCAN_SECONDS = 1.0
# The download reads this many lines a query.
LOG_TEXT_WINDOW = 5000
# ``before`` for log_hits: the newest hits, however long the log.
NEWEST = 2**63 - 1
# Throughput is measured over the attempt's last points: recent enough to follow a change
# of speed, enough of them to smooth one slow step.
RATE_WINDOW_POINTS = 50
RECENT_HOST_RUNS = 25
RECENT_SNAPSHOT_RUNS = 15
RECENT_PROJECT_RUNS = 25


def log_tail(run: Run, lines: int = LOG_TAIL_LINES) -> list[RunEvent]:
    """The last ``lines`` log events, oldest first."""
    newest = RunEvent.objects.filter(run=run, type="log").order_by("-id")[:lines]
    return list(reversed(newest))


def steps(run: Run) -> list[RunEvent]:
    return list(RunEvent.objects.filter(run=run, type=STEP).order_by("id"))


def metric_keys(run: Run) -> list[str]:
    """The run's metric names in the order its charts are drawn: losses first, then by name.

    A series of another source than ``track`` is named ``key (source)`` (``loss (stdout)``),
    as the charts' script reads it back (npulab/charts.js), so one key from two sources is
    two charts.
    """
    names = MetricSeries.objects.filter(run=run).values_list("key", "source")
    ordered = sorted(names, key=lambda row: chart_order(*row))
    return [series_label(key, source) for key, source in ordered]


def chart_order(key: str, source: str) -> tuple[bool, bool, str, int, int]:
    """Where series ``key`` of ``source`` comes among a run's charts: losses first, then by
    name, one key's sources in ``SOURCES``' order. The run's own (rank 0's) come before any
    other rank's (``loss@rank3``, asked for by ``metric_ranks``), which follow key by key."""
    own, rank = key_rank(key)
    return (
        rank > 0,
        "loss" not in own.rsplit("/", 1)[-1].lower(),
        own,
        rank,
        SOURCES.index(source) if source in SOURCES else len(SOURCES),
    )


def logged_parameters(run: Run) -> tuple[dict[str, str], dict[str, str]]:
    """The params and tags the run's script logged (MLflow's ``log_param``, ``set_tag``), the
    last value of each key; a deleted tag is gone."""
    params: dict[str, str] = {}
    tags: dict[str, str] = {}
    rows = RunEvent.objects.filter(run=run, type__in=(PARAM, TAG)).order_by("id")
    for kind, data in rows.values_list("type", "data"):
        key, value = str(data.get("key", "")), str(data.get("value", ""))
        if kind == PARAM:
            params[key] = value
        elif data.get("deleted"):
            tags.pop(key, None)
        else:
            tags[key] = value
    return dict(sorted(params.items())), dict(sorted(tags.items()))


def series_label(key: str, source: str) -> str:
    """How pages name a run's series: its key, with its source unless it is ``track``."""
    return key if source == TRACK else f"{key} ({source})"


@dataclass
class Progress:
    """How far a run has got, from its metrics and its step events.

    ``step`` counts the steps done by the furthest metric (a run logging from step 0 has done
    step + 1); ``total_steps`` is what its spec asks for, when it says. ``running_step`` is the
    ordinal of the reported step running now, for a kind that reports steps, and
    ``running_step_name`` its name when the runner said it began (a ``step_started`` event);
    ``running_s`` is how long it has run (without the name: since the last step ended).
    """

    step: int | None = None
    total_steps: int | None = None
    steps_per_s: float | None = None
    eta_s: float | None = None
    running_step: int | None = None
    running_step_name: str | None = None
    running_s: float | None = None
    finished_steps: tuple[str, ...] = ()

    @property
    def percent(self) -> int | None:
        if self.step is None or not self.total_steps:
            return None
        return min(100, int(100 * self.step / self.total_steps))


def progress(run: Run, now: datetime | None = None) -> Progress | None:
    """The run's progress; None before it started."""
    if run.started_at is None:
        return None
    now = now or timezone.now()
    kind = get_kind(run.kind)
    found = Progress()
    if kind.total_steps_field:
        found.total_steps = int(run.spec.get(kind.total_steps_field) or 0) or None
    furthest = (
        MetricSeries.objects.filter(run=run, last_step__isnull=False)
        .order_by("-last_step", "-points")
        .first()
    )
    if furthest is not None:
        counted_from_zero = reads.first_step(furthest.pk) == 0
        found.step = furthest.last_step + 1 if counted_from_zero else furthest.last_step
        if run.is_active:
            found.steps_per_s = _steps_per_s(furthest, run.attempt)
    if found.steps_per_s and found.total_steps and found.step is not None:
        found.eta_s = max(0, found.total_steps - found.step) / found.steps_per_s
    if kind.reports_steps and run.status == Run.Status.RUNNING:
        finished = list(
            RunEvent.objects.filter(run=run, type=STEP, attempt=run.attempt)
            .order_by("id")
            .values_list("time", "data__name")
        )
        since = finished[-1][0] if finished else run.started_at
        current = (
            RunAttempt.objects.filter(run=run, number=run.attempt)
            .values_list("current_step", "current_step_started_at")
            .first()
        )
        if current and current[0]:
            found.running_step_name, since = current[0], current[1] or since
        found.finished_steps = tuple(str(name) for _, name in finished)
        found.running_step = len(finished) + 1
        found.running_s = max(0.0, (now - since).total_seconds())
    return found


def _steps_per_s(series: MetricSeries, attempt: int) -> float | None:
    """Steps a second over the attempt's last points; None with too few to tell."""
    window = reads.recent(series.pk, attempt, RATE_WINDOW_POINTS)
    if len(window) < 2:
        return None
    first_step, last_step = window.steps[0].item(), window.steps[-1].item()
    first_time, last_time = window.times[0].item(), window.times[-1].item()
    if last_time <= first_time:
        return None
    return (last_step - first_step) / (last_time - first_time)


def cancel_warning(run: Run, now: datetime | None = None) -> str:
    """What cancelling the run now loses, for the confirmation a user answers first."""
    now = now or timezone.now()
    asked = f"Cancel run #{run.pk}?"
    if run.started_at is None:
        return f"{asked} It has not started: nothing is lost."
    for capability in capabilities.of(run):
        kept = capability.cancel_warning(run, now)
        if kept:
            return f"{asked} {kept}"
    attempt = run.attempts.filter(number=run.attempt).values_list("started_at", flat=True).first()
    elapsed = duration_text(now - (attempt or run.started_at))
    return f"{asked} Its {elapsed} of work will be lost: a restart starts it over."


def duration_text(delta: Any) -> str:
    """A duration as a person reads it: 1 h 5 min, 3 min 2 s, 40 s."""
    seconds = max(0, int(delta.total_seconds()))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min"
    if minutes:
        return f"{minutes} min {seconds} s"
    return f"{seconds} s"


def log_attempts(run: Run) -> list[int]:
    """The attempts whose logs there may be, oldest first."""
    numbers = set(run.attempts.values_list("number", flat=True))
    return sorted(numbers | {run.attempt}) if run.started_at or numbers else []


def log_line_count(run: Run, attempt: int) -> int:
    """How many lines the attempt logged: its last line's number, read from an index."""
    last = (
        RunEvent.objects.filter(run=run, attempt=attempt, line_no__isnull=False)
        .order_by("-line_no")
        .values_list("line_no", flat=True)
        .first()
    )
    return last or 0


class _NumberedLines:
    """An attempt's log as the Paginator reads it: counted by its last line's number, and a
    page read as a range of line numbers, so a page costs the same in a log of any length."""

    def __init__(self, run: Run, attempt: int) -> None:
        self._lines = RunEvent.objects.filter(run=run, attempt=attempt, line_no__isnull=False)
        self._count = log_line_count(run, attempt)

    def count(self) -> int:
        return self._count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, window: slice) -> list[RunEvent]:
        lines = self._lines.filter(line_no__gt=window.start, line_no__lte=window.stop)
        return list(lines.order_by("line_no"))


def log_page(run: Run, attempt: int, page: Any) -> Page:
    """One page of an attempt's whole log; ``page`` "last" is the newest, the one a live log
    follows. Each line has ``line_no`` (its number in the log) and ``log_page`` (its page)."""
    paginator = Paginator(_NumberedLines(run, attempt), LOG_PAGE_LINES)
    found = paginator.get_page(paginator.num_pages if page == "last" else page)
    _place(found.object_list)
    return found


@dataclass
class LogHits:
    """The lines of a stretch of an attempt's log that a search, a stream or a node keeps.

    ``first`` to ``last`` is the stretch scanned, of the log's ``total`` lines: the whole log
    when it is short, else up to the page's worth of hits or as far as the scan got in its
    time (``stopped``), from where the reader asked (after a line, or before one).
    """

    lines: list[RunEvent]
    first: int
    last: int
    total: int
    stopped: bool
    backward: bool = False

    def __iter__(self) -> Iterator[RunEvent]:
        return iter(self.lines)

    def __len__(self) -> int:
        return len(self.lines)

    @property
    def whole(self) -> bool:
        return self.first <= 1 and self.last >= self.total

    @property
    def has_before(self) -> bool:
        return self.first > 1

    @property
    def has_after(self) -> bool:
        return self.last < self.total


def log_hits(
    run: Run,
    attempt: int,
    query: str = "",
    stream: str = "",
    node: int | None = None,
    after: int = 0,
    before: int | None = None,
    rank: int | None = None,
) -> LogHits:
    """The lines containing ``query`` (and of one ``stream``, or of one ``node``: a host of a
    run across hosts, or of one ``rank``: a process of a multi-process run) after line
    ``after``, or the last page of them before line ``before``.

    A search of a long log scans it in line order, a window of lines at a time, and stops
    when its page is full or ``LOG_SCAN_SECONDS`` have gone: a request costs at most about
    that, however long the log; the reader goes on from where it stopped. (No text index:
    one would cost every line's ingestion, for searches that are rare next to writes.)
    """
    total = log_line_count(run, attempt)
    lines = RunEvent.objects.filter(run=run, attempt=attempt, line_no__isnull=False)
    if query:
        lines = lines.filter(data__line__icontains=query)
    if stream:
        lines = lines.filter(data__stream=stream)
    if node is not None:
        # Node rank 0's lines carry no node: they are the run's own.
        lines = lines.filter(data__node=node) if node else lines.exclude(data__has_key="node")
    if rank is not None:
        # The lines prefixed with the rank's, which ingestion keeps as their rank.
        lines = lines.filter(data__rank=rank)
    backward = before is not None
    # The edge of the stretch scanned so far: it grows down from ``before``, or up from ``after``.
    edge = min(before, total + 1) if before is not None else max(after, 0)
    found: list[RunEvent] = []
    deadline = monotonic() + LOG_SCAN_SECONDS
    while True:
        wanted = LOG_PAGE_LINES - len(found)
        if backward:
            low = max(1, edge - LOG_SCAN_LINES)
            window = lines.filter(line_no__gte=low, line_no__lt=edge).order_by("-line_no")
        else:
            high = min(total, edge + LOG_SCAN_LINES)
            window = lines.filter(line_no__gt=edge, line_no__lte=high).order_by("line_no")
        got = list(window[:wanted])
        found += got
        if len(got) == wanted:
            # A full page: the stretch ends at its last hit, and the next page goes on there.
            edge = got[-1].line_no
            stopped = False
            break
        edge = low if backward else high
        ended = edge <= 1 if backward else edge >= total
        if ended or monotonic() >= deadline:
            stopped = not ended
            break
    found.sort(key=lambda event: event.line_no)
    _place(found)
    if backward:
        first, last = edge, min(before, total + 1) - 1
    else:
        first, last = max(after, 0) + 1, edge
    return LogHits(found, first, max(last, first - 1), total, stopped, backward)


def _place(events: list[RunEvent]) -> None:
    """Give each line the page of the whole log it is on, for the links to it."""
    for event in events:
        event.log_page = (event.line_no - 1) // LOG_PAGE_LINES + 1


# The start of an evidence line that marks a log line (the diagnosis keeps its text cleaned
# of colours and cut; its start is the line's own).
EVIDENCE_PREFIX = 120


def mark_evidence(run: Run, events: list[RunEvent]) -> None:
    """Set ``evidence`` on the log lines the run's diagnosis quotes (docs/diagnosis.md)."""
    quoted = [
        (str(item.get("file", "")), str(item.get("text", ""))[:EVIDENCE_PREFIX])
        for item in ((run.diagnosis or {}).get("evidence") or [])
        if isinstance(item, dict) and item.get("text")
    ]
    for event in events:
        line = str(event.data.get("line", ""))
        stream = event.data.get("stream")
        event.evidence = any(file == stream and text and text in line for file, text in quoted)


def log_text(run: Run, attempt: int | None = None, query: str = "") -> Iterator[str]:
    """The log as text, one line per event (time, stream, line), attempts headed when several.

    Read a window of line numbers at a time: the first bytes come at once, however long the
    log. (A server-side cursor outside a transaction is declared WITH HOLD, and PostgreSQL
    then reads the whole result before the first row.)
    """
    # Lines are stored under the run's attempt at the time: attempts 1 to its current one.
    for number in [attempt] if attempt is not None else range(1, run.attempt + 1):
        lines = RunEvent.objects.filter(run=run, attempt=number, line_no__isnull=False)
        if query:
            lines = lines.filter(data__line__icontains=query)
        fields = ("time", "data__stream", "data__line")
        headed = attempt is not None
        total = log_line_count(run, number)
        for first in range(0, total, LOG_TEXT_WINDOW):
            window = lines.filter(line_no__gt=first, line_no__lte=first + LOG_TEXT_WINDOW)
            for time, stream, line in window.order_by("line_no").values_list(*fields):
                if not headed:
                    headed = True
                    yield f"# attempt {number}\n"
                yield f"{time.isoformat(timespec='milliseconds')} {stream or '':<6} {line or ''}\n"


def environment_differences(runs: list[Run]) -> list[dict[str, Any]]:
    """Each run's key versions, and which of them differ from the first run's.

    Runs compared on one chart (the same model on two CANN versions, say) are
    read together with what changed underneath them.
    """
    rows = []
    base = runs[0].snapshot.summary if runs and runs[0].snapshot else None
    for run in runs:
        summary = run.snapshot.summary if run.snapshot else None
        changes = version_changes(base, summary) if base is not None and summary is not None else []
        rows.append({"run": run, "summary": summary, "changes": changes})
    return rows


def host_runs_context(host: Host, viewer: Any) -> dict[str, Any]:
    """The host page's runs: each device with the run leasing it, the newest runs there.

    Only the viewer's projects' runs are named; a device another project's run
    holds is just busy.
    """
    visible = visible_runs(viewer, Run.objects.filter(host=host))
    leases = {lease.device_index: lease.run_id for lease in host.leases.all()}
    shown = {run.pk: run for run in visible.filter(pk__in=set(leases.values()))}
    devices = [
        dict(
            device,
            run=shown.get(leases.get(device["index"])),
            busy=device["index"] in leases,
        )
        for device in host.devices
    ]
    runs = visible.select_related("submitted_by")[:RECENT_HOST_RUNS]
    return {"devices": devices, "runs": runs}


def project_runs_context(project: Project, viewer: Any) -> dict[str, Any]:
    """The project page's runs: the newest of the project, and how many it has."""
    runs = project.runs.select_related("host", "submitted_by")
    return {"runs": runs[:RECENT_PROJECT_RUNS], "run_count": runs.count()}


def snapshot_runs_context(snapshot: Snapshot, viewer: Any) -> dict[str, Any]:
    """The snapshot page's runs: the newest of the viewer's projects that ran under it."""
    runs = visible_runs(viewer, Run.objects.filter(snapshot=snapshot)).select_related("host")
    runs = runs[:RECENT_SNAPSHOT_RUNS]
    return {"runs": runs}
