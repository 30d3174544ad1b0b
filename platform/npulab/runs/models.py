from __future__ import annotations

from collections.abc import Callable, Iterable
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
    # A run is never placed again on a host where it failed this often.
    FAILURES_BEFORE_AVOIDING = 2
    kind = models.CharField(max_length=32)
    name = models.CharField(max_length=200, blank=True)
    tags = models.JSONField(default=list, blank=True)
    spec = models.JSONField()
    priority = models.IntegerField(default=0)
    device_type = models.CharField(max_length=8, choices=DeviceType.choices)
    devices = models.PositiveSmallIntegerField(default=1)
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

    @cached_property
    def pool_ids(self) -> frozenset[int]:
        """The pools of the run's project: the only hosts it may be placed on."""
        # .all(): a placement pass prefetches the pools of every queued run's project.
        return frozenset(pool.pk for pool in self.project.pools.all())

    def outside_pools(self, host: Host) -> str:
        """Why ``host`` is not one the run's project may use, or ""."""
        if host.pool_id in self.pool_ids:
            return ""
        return f"is not in a pool of project '{self.project.slug}'"

    def unsuited_host(self, host: Host) -> str:
        """Why ``host`` can never take this run, whatever its state and load; "" if it can."""
        outside = self.outside_pools(host)
        if outside:
            return outside
        if host.device_type != self.device_type:
            return f"has {host.device_type} devices, the run needs {self.device_type}"
        missing = self._missing_labels(host)
        if missing:
            return "lacks label(s) " + ", ".join(missing)
        if self.host_faults.get(host.name, 0) >= self.FAILURES_BEFORE_AVOIDING:
            return f"failed this run {self.host_faults[host.name]} times"
        return ""

    def unplaceable(self, hosts: Iterable[Host]) -> tuple[str, str]:
        """(field, why) when none of ``hosts`` could ever take this run; ("", "") if one could.

        "Ever": a host's state and load do not matter (a disabled or offline
        host comes back), only what it is: its device type and count and its
        labels. A host whose worker never registered is known by name only,
        so it cannot be held against a run that names it.
        """
        hosts = list(hosts)
        if self.requested_host:
            return self._unplaceable_on_named(hosts)
        usable = [host for host in hosts if not self.outside_pools(host)]
        if hosts and not usable:
            return "project", f"no host is in a pool of project '{self.project.slug}'"
        registered = [host for host in usable if host.registered is not None]
        typed = [host for host in registered if host.device_type == self.device_type]
        if not typed:
            if not registered:
                return (
                    "device_type",
                    f"no host is registered yet (the run needs a {self.device_type} host)",
                )
            found = _listing(registered, lambda host: f"{host.name} has {_devices(host)}")
            return "device_type", f"no {self.device_type} host is registered: {found}"
        labelled = [host for host in typed if not self._missing_labels(host)]
        if not labelled:
            found = _listing(
                typed, lambda host: f"{host.name} has {', '.join(host.labels) or 'none'}"
            )
            return (
                "labels",
                f"no {self.device_type} host carries label(s) {', '.join(self.labels)}: {found}",
            )
        if not any(host.device_count >= self.devices for host in labelled):
            wanted = f"{self.device_type} host" + (
                f" with label(s) {', '.join(self.labels)}" if self.labels else ""
            )
            found = _listing(labelled, lambda host: f"{host.name} has {host.device_count}")
            return "devices", f"no {wanted} has {self.devices} devices: {found}"
        return "", ""

    def _unplaceable_on_named(self, hosts: list[Host]) -> tuple[str, str]:
        name = self.requested_host
        host = next((host for host in hosts if host.name == name), None)
        if host is None:
            return "host", no_such_host(name, hosts)
        outside = self.outside_pools(host)
        if outside:
            return "host", f"host '{name}' {outside}"
        if host.registered is None:
            return "", ""
        if host.device_type != self.device_type:
            return (
                "device_type",
                f"host '{name}' has {_devices(host)}, the run needs {self.device_type}",
            )
        missing = self._missing_labels(host)
        if missing:
            return "labels", f"host '{name}' lacks label(s) {', '.join(missing)}"
        if host.device_count < self.devices:
            return "devices", f"host '{name}' has {_devices(host)}, the run needs {self.devices}"
        return "", ""

    def _missing_labels(self, host: Host) -> list[str]:
        return [label for label in self.labels if label not in host.labels]

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


# Hosts a placement refusal names, at most: enough to see what exists.
HOSTS_LISTED = 4


def no_such_host(name: str, hosts: list[Host]) -> str:
    """Why a run cannot name ``name`` as its host, and which hosts there are."""
    if not hosts:
        return f"no host named '{name}'; there are no hosts yet"
    return f"no host named '{name}'; the hosts are {_listing(hosts, lambda host: host.name)}"


def _devices(host: Host) -> str:
    plural = "s" if host.device_count != 1 else ""
    return f"{host.device_count} {host.device_type} device{plural}"


def _listing(hosts: list[Host], describe: Callable[[Host], str]) -> str:
    """ "a, b, c, …": what exists, for a placement refusal."""
    more = ", …" if len(hosts) > HOSTS_LISTED else ""
    return ", ".join(describe(host) for host in hosts[:HOSTS_LISTED]) + more


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

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["run", "type", "id"], name="runevent_run_type")]

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
