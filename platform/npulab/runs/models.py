from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone
from django.utils.functional import cached_property

from npulab.core.errors import InvalidTransition
from npulab.hosts.models import DeviceType, Host
from npulab.projects.models import Project
from workers.contract import kinds
from workers.contract.redact import redact_env


def cause_label(name: str) -> str:
    """How a page names an exit cause (the contract's label; the name if none declares it)."""
    cause = kinds.cause(name)
    return cause.label if cause else name


def is_infrastructure(name: str) -> bool:
    """A failure of the machine or the platform, not of the job: CI may rerun it."""
    cause = kinds.cause(name)
    return bool(cause and cause.infrastructure)


class Run(models.Model):
    """One execution request: a spec, where it was placed, and how it ended.

    The row is the truth about the run; Celery only carries "execute run N,
    attempt K" to the host's queue.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        DISPATCHED = "dispatched", "Dispatched"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"
        LOST = "lost", "Lost"
        # Waited for a host that could take it (wait_for_host) and none came in time.
        EXPIRED = "expired", "Expired"

    ACTIVE = (Status.QUEUED, Status.DISPATCHED, Status.RUNNING)
    # Ended runs a user may start again as a new attempt.
    RESTARTABLE = (Status.FAILED, Status.CANCELLED, Status.LOST, Status.EXPIRED)
    # Which status may follow which: every change goes through transition_to.
    # RUNNING -> QUEUED is an automatic restart as a new attempt; an ended
    # run goes back to QUEUED only when a user restarts it.
    TRANSITIONS = {
        Status.QUEUED: {Status.DISPATCHED, Status.CANCELLED, Status.EXPIRED},
        Status.DISPATCHED: {Status.RUNNING, Status.QUEUED, Status.CANCELLED, Status.LOST},
        Status.RUNNING: {
            Status.SUCCEEDED,
            Status.FAILED,
            Status.CANCELLED,
            Status.LOST,
            Status.QUEUED,
        },
        Status.FAILED: {Status.QUEUED},
        Status.CANCELLED: {Status.QUEUED},
        Status.LOST: {Status.QUEUED},
        Status.EXPIRED: {Status.QUEUED},
    }
    kind = models.CharField(max_length=32)
    name = models.CharField(max_length=200, blank=True)
    tags = models.JSONField(default=list, blank=True)
    spec = models.JSONField()
    priority = models.IntegerField(default=0)
    device_type = models.CharField(max_length=8, choices=DeviceType.choices)
    devices = models.PositiveSmallIntegerField(default=1, help_text="Devices on each host.")
    # A gang: the run's attempts hold this many placements, one per host, leased together.
    hosts = models.PositiveSmallIntegerField(
        default=1, db_default=1, help_text="Hosts the run spans, each with `devices` devices."
    )
    # A run whose placements its kind puts apart (a parity run's sides, each on the host it
    # asks for): what each node rank's host must be, resolved at submit (runs.placement.Wanted
    # reads it). They run side by side and never rendezvous. Empty: `hosts` alike hosts.
    placement_rules = models.JSONField(
        default=list,
        blank=True,
        db_default=models.Value([], output_field=models.JSONField()),
        help_text="Per node rank: role, field, device_type, host, pool, pool_id, labels.",
    )
    # A name, not a key: a run that asked for a host that is later deleted
    # must say so, not drift to another host.
    requested_host = models.CharField(max_length=63, blank=True)
    labels = models.JSONField(default=list, blank=True)
    wait_for_host = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Queued even if no registered host could take it, until one could.",
    )
    queue_expires_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="A run waiting for a host that could take it expires at this time.",
    )

    status = models.CharField(
        max_length=12, choices=Status.choices, default=Status.QUEUED, db_index=True
    )
    attempt = models.PositiveIntegerField(default=1)
    host = models.ForeignKey(
        Host, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    device_indices = models.JSONField(default=list, blank=True)
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    # Who may see the run, and which hosts it may go to (the project's pools).
    # No default: whoever makes a run names its project (do_submit_run), and a run built in
    # memory costs no query.
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="runs")
    snapshot = models.ForeignKey(
        "snapshots.Snapshot",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="runs",
        help_text="The environment the run executed in.",
    )

    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    exited_at = models.DateTimeField(
        null=True, blank=True, help_text="When the runner process exited, by the host's clock."
    )
    finished_at = models.DateTimeField(null=True, blank=True)
    last_heartbeat = models.DateTimeField(null=True, blank=True)

    queue_reason = models.CharField(max_length=500, blank=True)
    cancel_requested = models.BooleanField(default=False)
    # Causes are declared in the contract (workers.contract.exits) and by
    # run kinds; no database choices, so a new kind needs no migration here.
    exit_cause = models.CharField(max_length=32, default="", blank=True)
    exit_reason = models.TextField(blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    result = models.JSONField(default=dict, blank=True, help_text="The runner's result event.")
    # Why it failed, in Ascend's codes (docs/diagnosis.md): the supervisor's diagnosis
    # event; the category is a column of its own for the run list's filter.
    diagnosis = models.JSONField(null=True, blank=True)
    diagnosis_category = models.CharField(max_length=32, blank=True, db_index=True)
    findings = models.JSONField(default=list, blank=True)
    events_offset = models.BigIntegerField(
        default=0, help_text="Bytes of this attempt's events.jsonl stored so far."
    )
    restarts = models.PositiveIntegerField(
        default=0, help_text="Attempts started automatically after a failure."
    )
    failed_hosts = models.JSONField(
        default=dict, blank=True, help_text="Host name -> attempts of this run that failed there."
    )
    # Placement prefers hosts with fewer failures of any kind; it avoids for good only a
    # host that may itself be why (a cause that blames the host): a killed worker or a lost
    # platform says nothing about it, and a single host keeps every restart.
    host_faults = models.JSONField(
        default=dict,
        # Rows written by code that predates the column (a rolling upgrade) get it too.
        db_default=models.Value({}, output_field=models.JSONField()),
        blank=True,
        help_text="Host name -> attempts that failed there for a cause that blames the host.",
    )
    # The submitter's Idempotency-Key (POST /api/v1/runs/): a retried submission
    # with the same key gets this run back instead of a second one. A database
    # default too, so rows written without the columns (older code, historical
    # models in migrations) have no key.
    idempotency_key = models.CharField(max_length=200, blank=True, default="", db_default="")
    idempotency_digest = models.CharField(
        max_length=64,
        blank=True,
        default="",
        db_default="",
        help_text="SHA-256 of the submitted document.",
    )

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [
            models.Index(fields=["status", "-priority", "created"], name="run_queue_order"),
            models.Index(fields=["host", "status"], name="run_host_status"),
        ]
        constraints = [
            # The database decides between two concurrent retries: one row per key and user.
            models.UniqueConstraint(
                fields=["submitted_by", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="run_idempotency_key_unique",
            )
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.name or self.kind}"

    def get_absolute_url(self) -> str:
        return reverse("runs:run_detail", args=[self.pk])

    @property
    def shape(self) -> str:
        """What the run holds, as the run list shows it: "2 × 8 npu", "1 cpu", and for
        placements apart each one's: "1 npu + 1 cuda"."""
        if self.placement_rules:
            return " + ".join(
                f"{self.devices} {rule['device_type']}" for rule in self.placement_rules
            )
        each = f"{self.devices} {self.device_type}"
        return f"{self.hosts} × {each}" if self.hosts > 1 else each

    @property
    def rendezvous(self) -> bool:
        """Whether its hosts meet (torch.distributed, HCCL): a gang of alike hosts does;
        placements apart (``placement_rules``) never talk to each other."""
        return self.hosts > 1 and not self.placement_rules

    @property
    def world_size(self) -> int:
        return self.hosts * self.devices

    @cached_property
    def pool_ids(self) -> frozenset[int]:
        """The pools of the run's project: the only hosts it may be placed on."""
        # .all(): a placement pass prefetches the pools of every queued run's project.
        return frozenset(pool.pk for pool in self.project.pools.all())

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE

    @property
    def infrastructure_failure(self) -> bool:
        # Expired: no host came for it, which is the platform's, not the job's.
        return self.status in (self.Status.LOST, self.Status.EXPIRED) or is_infrastructure(
            self.exit_cause
        )

    @property
    def exit_cause_label(self) -> str:
        # An expired run never ran, so no cause: its status says how it ended.
        if not self.exit_cause and not self.is_active:
            return self.get_status_display()
        return cause_label(self.exit_cause)

    @property
    def duration(self) -> timedelta | None:
        if self.started_at is None:
            return None
        return (self.finished_at or timezone.now()) - self.started_at

    @property
    def display_spec(self) -> dict:
        """The spec as users may see it: in its kind's field order, secret-looking env redacted.

        (PostgreSQL's jsonb keeps no key order of its own.)
        """
        kind = kinds.get(self.kind)
        order = [field.name for field in kind.fields] if kind else []
        spec = {key: self.spec[key] for key in order if key in self.spec}
        spec.update({key: value for key, value in self.spec.items() if key not in spec})
        if spec.get("env"):
            spec["env"] = redact_env(spec["env"])
        return spec

    def can_transition(self, status: str) -> bool:
        return status in self.TRANSITIONS.get(self.status, set())

    def transition_to(self, status: str, now: datetime | None = None) -> None:
        """Move to ``status`` and stamp the time; callers save the row."""
        if not self.can_transition(status):
            raise InvalidTransition(f"run {self.pk} cannot go from {self.status} to {status}")
        now = now or timezone.now()
        self.status = status
        if status == self.Status.DISPATCHED:
            self.dispatched_at = now
        elif status == self.Status.RUNNING:
            # A restarted run keeps the start of its first attempt.
            self.started_at = self.started_at or now
            self.last_heartbeat = now
        elif status == self.Status.QUEUED:
            self.dispatched_at = None
            self.finished_at = None
        elif status not in self.ACTIVE:
            self.finished_at = now


class RunAttempt(models.Model):
    """One execution of a run on one host; a restarted run has several."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()
    host = models.ForeignKey(
        Host, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    device_indices = models.JSONField(default=list, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=12, choices=Run.Status.choices, default=Run.Status.RUNNING)
    exit_cause = models.CharField(max_length=32, blank=True)
    exit_reason = models.TextField(blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    resumed_from_step = models.BigIntegerField(null=True, blank=True)
    # The step running now, from the runner's step_started events: one row per attempt
    # changes, no row per step is added.
    current_step = models.CharField(
        max_length=200, blank=True, default="", help_text="The step running now, if any."
    )
    current_step_started_at = models.DateTimeField(
        null=True, blank=True, help_text="When that step began, by the host's clock."
    )
    # Found as the lines are stored, once: the log page's "First error" link reads it
    # instead of searching a log of any size on every request.
    first_error_line = models.PositiveBigIntegerField(
        null=True,
        blank=True,
        help_text="The number of the attempt's first log line that looks like an error.",
    )

    class Meta:
        ordering = ["number"]
        constraints = [
            models.UniqueConstraint(fields=["run", "number"], name="one_attempt_number_per_run")
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} attempt {self.number}"

    @property
    def exit_cause_label(self) -> str:
        return cause_label(self.exit_cause)

    @property
    def infrastructure_failure(self) -> bool:
        return is_infrastructure(self.exit_cause)

    @property
    def duration(self) -> timedelta:
        return (self.finished_at or timezone.now()) - self.started_at


class RunEvent(models.Model):
    """One event of a run other than a metric: a log line, a step result, a checkpoint ..."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    attempt = models.PositiveIntegerField()
    type = models.CharField(max_length=32)
    time = models.DateTimeField()
    data = models.JSONField(default=dict)
    # A log line's place in its attempt's log, from 1, given as it is stored: a page of a log
    # of any size is a range of these, read by an index, never a count of the lines before.
    line_no = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="A log line's number in its attempt's log."
    )

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["run", "type", "id"], name="runevent_run_type"),
            models.Index(
                fields=["run", "attempt", "line_no"],
                name="runevent_log_line",
                condition=models.Q(line_no__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.type} of run {self.run_id}"


class DeviceLease(models.Model):
    """A device of a host held by a run from placement until the run ends."""

    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="leases")
    device_index = models.PositiveIntegerField()
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="leases")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            # The database, not the scheduler's care, rules out double booking.
            models.UniqueConstraint(fields=["host", "device_index"], name="one_lease_per_device")
        ]

    def __str__(self) -> str:
        return f"{self.host}:{self.device_index} -> run {self.run_id}"


class Placement(models.Model):
    """One host's share of a run attempt: its devices, its ranks, and how it went there.

    An attempt holds ``run.hosts`` placements, leased together (a gang) and ended
    together. Node rank 0 gives the rendezvous (its host's advertised address and
    ``master_port``); a single-host run is the case of one placement.
    """

    class State(models.TextChoices):
        LEASED = "leased", "Leased"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        STOPPED = "stopped", "Stopped"
        LOST = "lost", "Lost"

    ACTIVE = (State.LEASED, State.RUNNING)

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="placements")
    attempt = models.PositiveIntegerField()
    node_rank = models.PositiveSmallIntegerField(default=0)
    host = models.ForeignKey(
        Host, null=True, blank=True, on_delete=models.SET_NULL, related_name="placements"
    )
    # Kept if the host is deleted: the run's history still names it.
    host_name = models.CharField(max_length=63, blank=True)
    # What the placement is for, in a run whose placements are apart ("side b"); "" in a gang.
    role = models.CharField(max_length=40, blank=True, default="", db_default="")
    snapshot = models.ForeignKey(
        "snapshots.Snapshot",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The environment this host's share ran in (its stack).",
    )
    device_indices = models.JSONField(default=list, blank=True)
    first_rank = models.PositiveIntegerField(default=0)
    ranks = models.PositiveIntegerField(default=1, help_text="Processes (ranks) on this host.")
    master_port = models.PositiveIntegerField(
        null=True, blank=True, help_text="Node rank 0: the rendezvous port on its host."
    )
    state = models.CharField(max_length=10, choices=State.choices, default=State.LEASED)
    pid = models.IntegerField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    exit_cause = models.CharField(max_length=32, blank=True, default="")
    exit_reason = models.TextField(blank=True, default="")
    result = models.JSONField(default=dict, blank=True)
    events_offset = models.BigIntegerField(
        default=0, help_text="Bytes of this placement's events.jsonl stored so far."
    )
    leased_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    exited_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    last_heartbeat = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["attempt", "node_rank"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "attempt", "node_rank"], name="one_placement_per_node_rank"
            )
        ]
        indexes = [models.Index(fields=["host", "state"], name="placement_host_state")]

    def __str__(self) -> str:
        return f"run {self.run_id} attempt {self.attempt} node {self.node_rank} on {self.host_name}"

    @property
    def is_active(self) -> bool:
        return self.state in self.ACTIVE

    @property
    def rank_range(self) -> list[int]:
        """[first, last] rank of this host's processes."""
        return [self.first_rank, self.first_rank + self.ranks - 1]
