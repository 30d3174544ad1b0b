"""Write paths for runs: every change of a run's state goes through one function here.

Views, the API, tasks and commands call these; none of them saves a Run's
status itself.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone

from npulab.audit import actions
from npulab.audit.services import record
from npulab.core.errors import IDEMPOTENCY_CONFLICT, Conflict, SubmissionInvalid
from npulab.core.sql import fetch_instance, update_fields
from npulab.health.services import record_infrastructure_failure
from npulab.hosts.models import HOST_NAME_PATTERN, Host
from npulab.projects.models import Membership, Project, default_project, role_at_least
from npulab.projects.selectors import needs_role, role_in
from npulab.runs import capabilities, gangs
from npulab.runs.dispatch import place_submitted, request_placement, send_execute
from npulab.runs.events import store_events
from npulab.runs.kinds import get as get_kind
from npulab.runs.models import DeviceLease, Placement, Run, RunAttempt
from npulab.runs.placement import (
    FAILURES_BEFORE_AVOIDING,
    hosts_left,
    no_such_host,
    unplaceable,
    waiting_for_host,
)
from npulab.snapshots.models import Snapshot
from workers.contract import exits, kinds
from workers.contract.diagnosis import HOST_BLAMES, USER_CODE
from workers.contract.gang import HOSTS
from workers.contract.spec import SpecError, split_submission, text_problem

log = logging.getLogger(__name__)

MAX_TAGS = 20
MAX_TAG_CHARS = 64
# How a run is named as the target of an audit entry.
AUDIT_RUN = "run"
PRIORITY_RANGE = (-1000, 1000)
# Ends the refusal of a run no registered host could take.
NO_HOST_HINT = (
    ". No registered host could ever take this run; "
    "submit it with wait_for_host: true to queue it until one could"
)


# -- submission -------------------------------------------------------------


def do_submit_run(user: AbstractBaseUser | None, document: Any, idempotency_key: str = "") -> Run:
    """Validate a submission (spec plus queueing fields) and queue the run.

    With an ``idempotency_key`` (the API's Idempotency-Key header), a second
    submission by the same user with the same key queues nothing: the same
    document gets the first run back, with ``run.replayed`` true, and another
    document raises Conflict (``idempotency_conflict``). The unique constraint
    on (submitted_by, idempotency_key) decides between two that arrive at once.
    """
    if not isinstance(document, dict):
        raise SubmissionInvalid({"spec": "must be a JSON object"})
    digest = _document_digest(document) if idempotency_key else ""
    if idempotency_key:
        # Before validation: a replay answers what was queued even if the
        # document would not validate today (its host since deleted ...).
        earlier = _idempotent_replay(user, idempotency_key, digest)
        if earlier is not None:
            return earlier
    spec_doc, submission = split_submission(document)
    errors: dict[str, str] = {}
    spec: dict[str, Any] = {}
    try:
        spec = kinds.validate(spec_doc)
    except SpecError as exc:
        errors.update(exc.errors)
    else:
        errors.update(get_kind(spec["kind"]).check_submission(spec))
    queueing = _clean_submission(submission, errors)
    project = _submission_project(user, submission.get("project"), errors)
    if errors:
        raise SubmissionInvalid(errors)
    # What the spec itself needs of a host (a MindSpore run: a host with MindSpore).
    needed = kinds.get(spec["kind"]).host_labels(spec)
    if needed:
        queueing["labels"] = list(dict.fromkeys([*queueing.get("labels", []), *needed]))
    rules = _placement_rules(spec, queueing, needed, project)
    run = Run(
        kind=spec["kind"],
        project=project,
        spec=spec,
        device_type=spec["device_type"],
        devices=spec["devices"],
        hosts=len(rules) or spec.get(HOSTS, 1),
        placement_rules=rules,
        submitted_by=user,
        queue_reason="waiting for the scheduler",
        idempotency_key=idempotency_key,
        idempotency_digest=digest,
        **queueing,
    )
    field, why = unplaceable(run, Host.objects.all())
    if why and not run.wait_for_host:
        raise SubmissionInvalid({field: why + NO_HOST_HINT})
    if why:
        _wait_for_host(run, why, timezone.now())

    try:
        with transaction.atomic():
            run.save(force_insert=True)
            _audit(
                actions.RUN_SUBMIT,
                run,
                user,
                {"device_type": run.device_type, "devices": run.devices, "hosts": run.hosts},
            )
    except IntegrityError:
        # A concurrent submission with the same key committed first: its run is the answer.
        earlier = _idempotent_replay(user, idempotency_key, digest) if idempotency_key else None
        if earlier is None:
            raise
        return earlier
    run.replayed = False
    transaction.on_commit(place_submitted)
    return run


def _placement_rules(
    spec: dict[str, Any], queueing: dict[str, Any], needed: list[str], project: Project
) -> list[dict[str, Any]]:
    """What each node rank's host must be, for a kind that puts its placements apart (a
    parity run's sides): each asks for its own host, pool or labels, or takes the run's.

    A pool is one of the project's, by name (SubmissionInvalid naming ``<field>.pool``).
    """
    entries = kinds.get(spec["kind"]).placements(spec)
    pools = {pool.name: pool.pk for pool in project.pools.all()} if entries else {}
    rules, errors = [], {}
    for entry in entries:
        pool = entry.get("pool") or ""
        if pool and pool not in pools:
            errors[f"{entry['field']}.pool"] = (
                f"no pool '{pool}' in project '{project.slug}'; its pools are "
                f"{', '.join(sorted(pools)) or 'none'}"
            )
        labels = entry.get("labels") or []
        rules.append(
            {
                "field": entry["field"],
                "role": entry["role"],
                "device_type": entry.get("device_type") or spec["device_type"],
                "host": entry.get("host") or queueing.get("requested_host", ""),
                "pool": pool,
                "pool_id": pools.get(pool),
                "labels": list(dict.fromkeys([*labels, *needed]))
                if labels
                else queueing.get("labels", []),
            }
        )
    if errors:
        raise SubmissionInvalid(errors)
    return rules


def _document_digest(document: dict[str, Any]) -> str:
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _idempotent_replay(user: AbstractBaseUser | None, key: str, digest: str) -> Run | None:
    """The run an earlier submission with ``key`` queued, if any; Conflict if its body differs."""
    run = Run.objects.filter(submitted_by=user, idempotency_key=key).first()
    if run is None:
        return None
    if run.idempotency_digest != digest:
        raise Conflict(
            f"Idempotency-Key {key!r} was used for run {run.pk} with a different body; "
            "use a new key for a new submission",
            code=IDEMPOTENCY_CONFLICT,
            run=run.pk,
        )
    run.replayed = True
    return run


def _wait_for_host(run: Run, why: str, now: datetime) -> None:
    """Queue ``run``, which no registered host could take, until one could, or it expires."""
    run.queue_expires_at = now + timedelta(seconds=settings.NPULAB["QUEUE_EXPIRY_S"])
    run.queue_reason = waiting_for_host(why, run.queue_expires_at)


def _submission_project(
    user: AbstractBaseUser | None, slug: Any, errors: dict[str, str]
) -> Project | None:
    """The project a run is submitted to: the one named, or the default project.

    One the user has no role in is "no project" (its name is not revealed); one
    where the user is only a viewer is refused with PermissionDenied (403).
    """
    if slug in (None, ""):
        project = default_project()
    elif not isinstance(slug, str):
        errors["project"] = "must be a project's slug"
        return None
    else:
        project = Project.objects.filter(slug=slug).first()
    if user is None:  # the platform itself (a command): no one's role to check
        return project
    role = role_in(user, project) if project is not None else None
    if role is None:
        errors["project"] = (
            f"no project '{slug}' that you are a member of"
            if slug
            else "you are not a member of the default project: name a project you are in"
        )
        return None
    if not role_at_least(role, Membership.Role.MEMBER):
        raise PermissionDenied(needs_role(project, role, Membership.Role.MEMBER))
    return project


def _clean_submission(submission: dict[str, Any], errors: dict[str, str]) -> dict[str, Any]:
    clean: dict[str, Any] = {}
    wait = submission.get("wait_for_host", False)
    if not isinstance(wait, bool):
        errors["wait_for_host"] = "must be true or false"
    else:
        clean["wait_for_host"] = wait
    host = submission.get("host")
    if host not in (None, "", "any"):
        if not isinstance(host, str) or not re.match(HOST_NAME_PATTERN, host):
            errors["host"] = "must be a host name"
        else:
            # A host that does not exist is reported here, with the other
            # fields' errors; what exists is checked once the spec is valid.
            if wait is not True and not Host.objects.filter(name=host).exists():
                errors["host"] = no_such_host(host, list(Host.objects.all())) + NO_HOST_HINT
            clean["requested_host"] = host
    name = submission.get("name", "")
    if not isinstance(name, str) or len(name) > 200:
        errors["name"] = "must be a string of at most 200 characters"
    elif text_problem(name):
        errors["name"] = text_problem(name)
    else:
        clean["name"] = name.strip()
    for key in ("tags", "labels"):
        value = submission.get(key, [])
        if (
            not isinstance(value, list)
            or len(value) > MAX_TAGS
            or not all(isinstance(item, str) and 0 < len(item) <= MAX_TAG_CHARS for item in value)
        ):
            errors[key] = (
                f"must be a list of at most {MAX_TAGS} non-empty strings "
                f"of at most {MAX_TAG_CHARS} characters"
            )
        elif any(text_problem(item) for item in value):
            errors[key] = next(filter(None, map(text_problem, value)))
        else:
            clean[key] = list(dict.fromkeys(value))
    priority = submission.get("priority", 0)
    low, high = PRIORITY_RANGE
    if isinstance(priority, bool) or not isinstance(priority, int) or not low <= priority <= high:
        errors["priority"] = f"must be an integer from {low} to {high}"
    else:
        clean["priority"] = priority
    return clean


# -- placement ----------------------------------------------------------------


def do_dispatch_run(run: Run, shares: list[tuple[Host, list[int]]], now: datetime) -> None:
    """Lease each share (a host and its device indices) to a queued run, all in the caller's
    transaction, and send the run to every host on commit: a gang, node rank 0 first.

    The caller (the scheduler) holds the run's row lock inside its transaction.
    """
    gangs.create_placements(run, shares, now)
    host, indices = shares[0]
    run.host = host
    run.device_indices = indices
    run.queue_reason = ""
    run.transition_to(Run.Status.DISPATCHED, now)
    run.save(
        update_fields=[
            "host",
            "device_indices",
            "queue_reason",
            "status",
            "dispatched_at",
            "updated",
        ]
    )
    for host, _ in shares:
        transaction.on_commit(functools.partial(send_execute, run.pk, run.attempt, host.queue))


# -- the host worker's side ------------------------------------------------


def _locked_run_of(host: Host, run_id: int, attempt: int) -> Run:
    """The run, locked, if it is this host's and this attempt is current.

    In plain SQL: every events batch of a run starts here, and building the ORM's query
    cost half again what the database's lock and row did (docs/benchmarks.md).
    """
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    run = fetch_instance(Run, _RUN_BY_ID + lock, [run_id])
    if run is None:
        raise Run.DoesNotExist(f"No run {run_id}.")
    if run.attempt != attempt:
        raise Conflict(f"attempt {attempt} of run {run_id} is stale; current is {run.attempt}")
    # A gang's other hosts: their placement says so (node rank 0 is the run's host).
    if run.host_id != host.id:
        run.placement = gangs.placement_on(run, host) if run.hosts > 1 else None
        if run.placement is None:
            raise PermissionDenied(f"run {run_id} is not placed on host {host.name}")
    else:
        run.placement = None
    return run


def _placement(run: Run, host: Host) -> Placement | None:
    """The host's placement of the current attempt (loaded by _locked_run_of for others)."""
    return run.placement or gangs.placement_on(run, host)


_RUN_BY_ID = "SELECT {columns} FROM {table} WHERE id = %s"


@transaction.atomic
def do_claim_run(host: Host, run_id: int, attempt: int) -> Run:
    """The host worker takes a dispatched run: it is running from now."""
    run = _locked_run_of(host, run_id, attempt)
    # The claim's reply tells a gang's host its peers: read once, with their hosts.
    run.current_placements = gangs.current(run)
    placement = next((p for p in run.current_placements if p.host_id == host.id), None)
    # The claim's answer carries the spec with its secret env values: only to a host of a
    # pool the run's project may use, whatever placed it here (the host moved meanwhile).
    if not Project.pools.through.objects.filter(
        project_id=run.project_id, pool_id=host.pool_id
    ).exists():
        raise Conflict(f"host {host.name} is in no pool of run {run_id}'s project")
    now = timezone.now()
    # A gang's first claim starts the run; each of its other hosts claims its own share once.
    later_share = (
        run.status == Run.Status.RUNNING
        and run.hosts > 1
        and placement is not None
        and placement.state == Placement.State.LEASED
    )
    if run.status != Run.Status.DISPATCHED and not later_share:
        raise Conflict(f"run {run_id} is {run.status}, not dispatched")
    if run.status == Run.Status.DISPATCHED:
        run.transition_to(Run.Status.RUNNING, now)
        run.events_offset = 0
        run.save(
            update_fields=["status", "started_at", "last_heartbeat", "events_offset", "updated"]
        )
        RunAttempt.objects.create(
            run=run,
            number=attempt,
            host_id=run.host_id,
            device_indices=run.device_indices,
            started_at=now,
        )
    if placement is not None:
        placement.state = Placement.State.RUNNING
        placement.started_at = now
        placement.last_heartbeat = now
        placement.save(update_fields=["state", "started_at", "last_heartbeat"])
    run.placement = placement
    return run


@transaction.atomic
def do_ingest_events(
    host: Host, run_id: int, attempt: int, start: int, end: int, events: list[Any]
) -> dict[str, Any]:
    """Store one batch of a run attempt's events.jsonl, exactly once.

    A batch is applied only when it starts at the offset stored so far; a
    batch already stored is acknowledged again (its reply was lost); any
    other start is refused with the offset to resend from.
    """
    run = _locked_run_of(host, run_id, attempt)
    if run.status != Run.Status.RUNNING:
        raise Conflict(f"run {run_id} is {run.status}; no more events are taken")
    if run.placement is not None:
        return _ingest_other_node(run, run.placement, start, end, events)
    if run.hosts > 1:
        # Node rank 0's share is heard from too: the sweeper looks at each host's.
        Placement.objects.filter(run=run, attempt=attempt, node_rank=0).update(
            last_heartbeat=timezone.now()
        )
    if start != run.events_offset:
        if end <= run.events_offset:
            return _ack(run, run.events_offset)
        raise Conflict(
            f"batch starts at byte {start}, expected {run.events_offset}",
            expected_start=run.events_offset,
        )
    now = timezone.now()
    result = store_events(run, events, now)
    if result is not None:
        run.result = result
    run.events_offset = end
    run.last_heartbeat = now
    update_fields(run, _BATCH_FIELDS)
    return _ack(run, end)


# What a batch changes of its run, written in one plain UPDATE: Run.save cost more than the
# batch's own statements (docs/benchmarks.md).
_BATCH_FIELDS = ("events_offset", "last_heartbeat", "result", "updated")


def _ack(run: Run, offset: int) -> dict[str, Any]:
    """The reply to an events batch: where to go on from, and what the host must know.

    A gang's hosts stop as soon as one of its placements failed.
    """
    cancel = run.cancel_requested or (run.hosts > 1 and gangs.stop_asked(run))
    reply = {"ack": offset, "cancel": cancel}
    for capability in capabilities.of(run):
        reply.update(capability.acknowledgement(run))
    return reply


def _ingest_other_node(
    run: Run, placement: Placement, start: int, end: int, events: list[Any]
) -> dict[str, Any]:
    """A batch from a gang's host other than node rank 0: its offset is its placement's.

    What it keeps is ``gangs.from_other_node``'s to say; its own result ends its placement.
    """
    if start != placement.events_offset:
        if end <= placement.events_offset:
            return _ack(run, placement.events_offset)
        raise Conflict(
            f"batch starts at byte {start}, expected {placement.events_offset}",
            expected_start=placement.events_offset,
        )
    now = timezone.now()
    kept, result = gangs.from_other_node(run, placement, events)
    if result is not None:
        placement.result = result
    store_events(run, kept, now)
    placement.events_offset = end
    placement.last_heartbeat = now
    placement.save(update_fields=["events_offset", "last_heartbeat", "result"])
    run.last_heartbeat = now
    run.save(update_fields=["last_heartbeat", "updated"])
    return _ack(run, end)


@transaction.atomic
def do_finish_run(host: Host, run_id: int, attempt: int, report: dict[str, Any]) -> Run:
    """The runner process exited and all its events are stored: decide the outcome."""
    run = _locked_run_of(host, run_id, attempt)
    if not run.is_active:
        return run  # a repeated report after a lost reply
    if run.status != Run.Status.RUNNING:
        raise Conflict(f"run {run_id} is {run.status}, not running")
    exit_code = report.get("exit_code")
    exited_at = report.get("exited_at")
    exited = (
        datetime.fromtimestamp(exited_at, tz=UTC) if isinstance(exited_at, int | float) else None
    )
    now = timezone.now()
    if run.hosts == 1:
        run.exit_code = exit_code
        run.exited_at = exited or run.exited_at
        status, cause, reason = _outcome(run, report)
        _end_attempt(run, status, cause, reason, now)
        return run
    placement = _placement(run, host)
    if placement is None or not placement.is_active:
        return run
    if placement.node_rank == 0:
        run.exit_code = exit_code
        run.exited_at = exited or run.exited_at
        result = run.result
    else:
        result = placement.result
    stopping = gangs.stop_asked(run)
    status, cause, reason = _outcome(run, report, result)
    if stopping and status != Run.Status.SUCCEEDED:
        state = Placement.State.STOPPED  # stopped because another host failed first
    else:
        state = _PLACEMENT_STATE.get(status, Placement.State.FAILED)
    _end_placement(placement, state, cause, reason, now, exit_code=exit_code, exited=exited)
    _gang_progress(run, now)
    return run


# A placement's state for each outcome of its host's share.
_PLACEMENT_STATE = {
    Run.Status.SUCCEEDED: Placement.State.SUCCEEDED,
    Run.Status.FAILED: Placement.State.FAILED,
    Run.Status.CANCELLED: Placement.State.STOPPED,
    Run.Status.LOST: Placement.State.LOST,
}


def _end_placement(
    placement: Placement,
    state: str,
    cause: str,
    reason: str,
    now: datetime,
    exit_code: int | None = None,
    exited: datetime | None = None,
) -> None:
    placement.state = state
    placement.exit_code = exit_code
    placement.exit_cause = cause
    placement.exit_reason = reason
    placement.exited_at = exited or now
    placement.finished_at = now
    placement.save()


def _gang_progress(run: Run, now: datetime) -> None:
    """After one of a gang's placements ended: end the attempt once all have.

    The first failure decides it (its host and ranks named); while the others
    still run, their next acknowledgement tells them to stop.
    """
    placements = gangs.current(run)
    if any(placement.is_active for placement in placements):
        return
    failed = gangs.first_failure(placements)
    if run.cancel_requested:
        _end_attempt(run, Run.Status.CANCELLED, exits.CANCELLED, run.exit_reason, now)
    elif failed is not None:
        status = Run.Status.LOST if failed.state == Placement.State.LOST else Run.Status.FAILED
        _end_attempt(run, status, failed.exit_cause, gangs.failure_reason(failed), now, failed.host)
    elif all(p.state == Placement.State.SUCCEEDED for p in placements):
        _end_attempt(run, Run.Status.SUCCEEDED, exits.COMPLETED, run.result.get("reason", ""), now)
    else:
        stopped = next(p for p in placements if p.state != Placement.State.SUCCEEDED)
        _end_attempt(
            run,
            Run.Status.FAILED,
            stopped.exit_cause or exits.PROCESS_EXIT,
            gangs.failure_reason(stopped),
            now,
            stopped.host,
        )


def _outcome(
    run: Run, report: dict[str, Any], result: dict[str, Any] | None = None
) -> tuple[str, str, str]:
    exit_code = report.get("exit_code")
    if run.cancel_requested:
        return Run.Status.CANCELLED, exits.CANCELLED, run.exit_reason or "cancelled"
    if report.get("error"):
        cause = exits.SPEC_INVALID if exit_code == exits.EXIT_INVALID_SPEC else exits.START_FAILED
        return Run.Status.FAILED, cause, str(report["error"]).strip()[-2000:]
    result = run.result if result is None else result
    if result.get("status") == exits.SUCCEEDED:
        if exit_code == exits.EXIT_SUCCEEDED:
            return Run.Status.SUCCEEDED, exits.COMPLETED, result.get("reason", "")
        reason = f"the runner reported success but exited with code {exit_code}"
        return Run.Status.FAILED, exits.PROCESS_EXIT, reason
    if result.get("status") == exits.FAILED:
        cause = result.get("cause") or exits.PROCESS_EXIT
        if kinds.cause(cause) is None:
            # Runners cannot write one (Outcome refuses it); a hand-made events file can.
            log.error("run %s reported exit cause %r, which no kind declares", run.pk, cause)
            cause = exits.PROCESS_EXIT
        return Run.Status.FAILED, cause, result.get("reason", "")
    reason = f"the runner exited with code {exit_code} and no result"
    if report.get("stop_reason"):
        reason += f" ({report['stop_reason']})"
    return Run.Status.FAILED, exits.PROCESS_EXIT, reason


# -- users' actions -----------------------------------------------------------


@transaction.atomic
def do_cancel_run(run_id: int, user: AbstractBaseUser) -> Run:
    """Cancel a run: at once if it has not started, else by killing its processes."""
    run = Run.objects.select_for_update().get(pk=run_id)
    if not run.is_active:
        raise Conflict(f"run {run.pk} is already {run.status}")
    if run.cancel_requested:
        return run
    run.cancel_requested = True
    run.exit_reason = f"cancelled by {user.get_username()}"
    _audit(actions.RUN_CANCEL, run, user, {"status": run.status})
    if run.status == Run.Status.RUNNING:
        # The host worker learns of it with its next events batch and stops
        # the process group; the run ends when the worker reports the exit.
        run.save(update_fields=["cancel_requested", "exit_reason", "updated"])
        return run
    run.exit_cause = exits.CANCELLED
    run.transition_to(Run.Status.CANCELLED)
    run.save()
    _release(run)
    _finished(run)
    return run


# -- the control plane --------------------------------------------------------


def sweep_runs(now: datetime | None = None, heard_since: datetime | None = None) -> dict[str, int]:
    """Requeue runs their host never claimed; mark runs whose host fell silent as lost.

    ``heard_since``: since when the platform could hear its hosts (``runs.liveness``).
    Silence before that is the platform's own outage, not the host's: no run is lost
    for it until the whole timeout has passed since.
    """
    now = now or timezone.now()
    silent_s = settings.NPULAB["RUN_HEARTBEAT_TIMEOUT_S"]
    # A run an outside MLflow client logs (npulab.mlflow) has no host to fall silent.
    silent = Run.objects.filter(
        status=Run.Status.RUNNING,
        last_heartbeat__lt=now - timedelta(seconds=silent_s),
        host__isnull=False,
    )
    if not _heard_for(now, heard_since, silent_s):
        silent = silent.none()
    silent = silent.values_list("pk", "host__name")
    waited = Run.objects.filter(status=Run.Status.QUEUED, queue_expires_at__lte=now).values_list(
        "pk", flat=True
    )
    counts = {"requeued": 0, "lost": 0, "expired": 0}
    for placement_id, reason in _lost_shares(now, heard_since).items():
        counts["lost"] += do_mark_placement_lost(placement_id, now, reason)
    for run_id, reason in _unclaimed_runs(now, heard_since).items():
        counts["requeued"] += do_requeue_run(run_id, now, reason)
    for run_id, host in list(silent):
        reason = f"no events or heartbeats from host {host} for {silent_s} s"
        counts["lost"] += do_mark_run_lost(run_id, now, reason)
    for run_id in list(waited):
        counts["expired"] += do_expire_run(run_id, now)
    return counts


def _heard_for(now: datetime, heard_since: datetime | None, seconds: int) -> bool:
    """Whether the platform has heard its hosts for the last ``seconds`` (no outage of its
    own in them), so that silence in them is the hosts'."""
    return heard_since is None or heard_since <= now - timedelta(seconds=seconds)


def _unclaimed_runs(now: datetime, heard_since: datetime | None) -> dict[int, str]:
    """Dispatched runs to requeue, each with why: not claimed within the dispatch timeout,
    or placed on a host that has gone offline since.

    A host whose worker died just after a run was dispatched to it never claims it (the
    message waits in its queue): once the host sweep calls it offline, the run need not
    wait out the whole dispatch timeout.
    """
    limits = settings.NPULAB
    waited_s = limits["DISPATCH_TIMEOUT_S"]
    dispatched = Run.objects.filter(status=Run.Status.DISPATCHED)
    unclaimed = {
        run_id: f"host {host or '?'} did not claim the run within {waited_s} s; requeued"
        for run_id, host in dispatched.filter(
            dispatched_at__lt=now - timedelta(seconds=waited_s)
        ).values_list("pk", "host__name")
    }
    if _heard_for(now, heard_since, limits["HOST_HEARTBEAT_TIMEOUT_S"]):
        stranded = dispatched.filter(
            placements__state=Placement.State.LEASED,
            placements__host__status=Host.Status.OFFLINE,
        ).values_list("pk", "placements__host_name")
        for run_id, host in stranded:
            unclaimed[run_id] = f"host {host} went offline before it claimed the run; requeued"
    return unclaimed


def _lost_shares(now: datetime, heard_since: datetime | None) -> dict[int, str]:
    """A running gang's placements to mark lost, each with why: its host fell silent, did
    not claim its share within the dispatch timeout, or went offline before it did. The
    other hosts keep the run alive; a lost placement stops them."""
    limits = settings.NPULAB
    silent_s, waited_s = limits["RUN_HEARTBEAT_TIMEOUT_S"], limits["DISPATCH_TIMEOUT_S"]
    shares = Placement.objects.filter(run__status=Run.Status.RUNNING, run__hosts__gt=1)
    lost: dict[int, str] = {}
    if _heard_for(now, heard_since, silent_s):
        gone = shares.filter(
            models.Q(
                state=Placement.State.RUNNING,
                last_heartbeat__lt=now - timedelta(seconds=silent_s),
            )
            | models.Q(
                state=Placement.State.LEASED, leased_at__lt=now - timedelta(seconds=waited_s)
            )
        )
        for placement_id, state, host in gone.values_list("pk", "state", "host_name"):
            lost[placement_id] = (
                f"no events or heartbeats from host {host} for {silent_s} s"
                if state == Placement.State.RUNNING
                else f"host {host} did not claim its share within {waited_s} s"
            )
    if _heard_for(now, heard_since, limits["HOST_HEARTBEAT_TIMEOUT_S"]):
        offline = shares.filter(state=Placement.State.LEASED, host__status=Host.Status.OFFLINE)
        for placement_id, host in offline.values_list("pk", "host_name"):
            lost[placement_id] = f"host {host} went offline before it claimed its share"
    return lost


@transaction.atomic
def do_expire_run(run_id: int, now: datetime) -> int:
    """End a run whose wait for a host that could take it ran out (1 if it did).

    A run some host could take by now is queued like any other: the expiry
    bounds only the wait for a host that does not exist.
    """
    run = Run.objects.select_for_update().get(pk=run_id)
    if run.status != Run.Status.QUEUED or run.queue_expires_at is None:
        return 0
    if run.queue_expires_at > now:
        return 0
    _, why = unplaceable(run, Host.objects.all())
    if not why:
        run.queue_expires_at = None
        run.save(update_fields=["queue_expires_at", "updated"])
        return 0
    waited = _span(settings.NPULAB["QUEUE_EXPIRY_S"])
    run.exit_reason = f"no host that could take the run registered within {waited}: {why}"
    run.queue_reason = ""
    run.transition_to(Run.Status.EXPIRED, now)
    run.save()
    _finished(run)
    return 1


def _span(seconds: int) -> str:
    """A setting's duration as a person reads it: 24 h, 90 min, 45 s."""
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    if seconds % 60 == 0:
        return f"{seconds // 60} min"
    return f"{seconds} s"


@transaction.atomic
def do_requeue_run(run_id: int, now: datetime, reason: str) -> int:
    """A dispatched run its host never claimed goes back to the queue (1 if it did), with
    ``reason`` as its queue reason."""
    run = Run.objects.select_for_update().get(pk=run_id)
    if run.status != Run.Status.DISPATCHED:
        return 0
    run.transition_to(Run.Status.QUEUED, now)
    run.queue_reason = reason
    run.host = None
    run.device_indices = []
    run.save()
    _release(run)
    return 1


def do_reconcile_host_runs(host: Host, running: list[int], now: datetime | None = None) -> int:
    """Bring the runs on ``host`` in line with the ones its worker says it runs.

    Those it lists are alive: between event batches (while the worker uploads
    a run's last checkpoints, say) its heartbeat keeps them from the sweeper.
    Those it no longer runs are lost. That happens when the host worker
    restarted: it kills what its earlier process left behind. A run claimed
    in the last moments may not be in the list yet, hence the grace period.
    """
    now = now or timezone.now()
    Run.objects.filter(host=host, status=Run.Status.RUNNING, pk__in=running).update(
        last_heartbeat=now
    )
    cutoff = now - timedelta(seconds=settings.NPULAB["RUN_CLAIM_GRACE_S"])
    # The grace runs from the start of the current attempt: a restarted run keeps its first
    # attempt's started_at, and its new attempt must not be lost to a heartbeat sent before
    # the worker listed it.
    attempt_started_before = models.Exists(
        RunAttempt.objects.filter(
            run=models.OuterRef("pk"), number=models.OuterRef("attempt"), started_at__lt=cutoff
        )
    )
    forgotten = (
        Run.objects.filter(host=host, status=Run.Status.RUNNING, hosts=1)
        .filter(attempt_started_before)
        .exclude(pk__in=running)
        .values_list("pk", flat=True)
    )
    reason = f"the host worker on {host.name} is no longer running it (it restarted)"
    lost = sum(do_mark_run_lost(run_id, now, reason) for run_id in list(forgotten))
    # A gang's hosts, node rank 0's too, by their placements: one whose share ended is
    # no longer listed while the others run on.
    shares = Placement.objects.filter(host=host, run__hosts__gt=1)
    shares.filter(state=Placement.State.RUNNING, run_id__in=running).update(last_heartbeat=now)
    forgotten_shares = (
        shares.filter(state=Placement.State.RUNNING, started_at__lt=cutoff)
        .exclude(run_id__in=running)
        .values_list("pk", flat=True)
    )
    return lost + sum(do_mark_placement_lost(pk, now, reason) for pk in list(forgotten_shares))


@transaction.atomic
def do_mark_placement_lost(placement_id: int, now: datetime, reason: str) -> int:
    """One host of a gang stopped running its share: the attempt fails, the others stop."""
    placement = Placement.objects.select_related("host").get(pk=placement_id)
    run = Run.objects.select_for_update().get(pk=placement.run_id)
    placement.refresh_from_db()
    if run.status != Run.Status.RUNNING or run.attempt != placement.attempt:
        return 0
    if not placement.is_active:
        return 0
    _end_placement(placement, Placement.State.LOST, exits.WORKER_LOST, reason, now)
    _gang_progress(run, now)
    return 1


@transaction.atomic
def do_mark_run_lost(run_id: int, now: datetime, reason: str) -> int:
    """A running run whose host stopped running it is lost, or cancelled if that was asked."""
    run = Run.objects.select_for_update().get(pk=run_id)
    if run.status != Run.Status.RUNNING:
        return 0
    if run.cancel_requested:
        reason = f"{run.exit_reason}; {reason}"
        _end_attempt(run, Run.Status.CANCELLED, exits.CANCELLED, reason, now)
    else:
        _end_attempt(run, Run.Status.LOST, exits.WORKER_LOST, reason, now)
    return 1


def _end_attempt(
    run: Run,
    status: str,
    cause: str,
    reason: str,
    now: datetime,
    failed_host: Host | None = None,
) -> None:
    """Close the running attempt; go on as a new attempt when restarts remain, else end.

    ``failed_host``: the gang's host that failed first (else the run's host).
    """
    RunAttempt.objects.filter(run=run, number=run.attempt).update(
        status=status,
        finished_at=now,
        exit_cause=cause,
        exit_reason=reason,
        exit_code=run.exit_code,
    )
    # What is still open ends with the attempt (a one-host run's placement, every one lost).
    Placement.objects.filter(run=run, attempt=run.attempt, state__in=Placement.ACTIVE).update(
        state=_PLACEMENT_STATE.get(status, Placement.State.FAILED),
        exit_code=run.exit_code,
        exit_cause=cause,
        exit_reason=reason,
        exited_at=run.exited_at or now,
        finished_at=now,
    )
    blamed = failed_host or run.host
    host = blamed.name if blamed else "?"
    for capability in capabilities.of(run):
        capability.on_attempt_end(run, now)
    max_restarts = get_kind(run.kind).max_restarts(run)
    restarted = False
    declared = kinds.cause(cause)
    # The diagnosis says whose failure it was (docs/diagnosis.md): the host's hardware or
    # network counts against the host and is retried elsewhere; the user's code is not retried.
    blame = (run.diagnosis or {}).get("blame") if status == Run.Status.FAILED else None
    host_blamed = blame in HOST_BLAMES
    if blamed is not None and (
        host_blamed or (declared and declared.infrastructure and declared.blames_host)
    ):
        # The host's health counts these (K within a window make it unhealthy).
        record_infrastructure_failure(blamed, run.pk, cause, now)
    if (
        status in (Run.Status.FAILED, Run.Status.LOST)
        and declared
        and (declared.restartable or host_blamed)
        and blame != USER_CODE
    ):
        run.failed_hosts = dict(run.failed_hosts, **{host: run.failed_hosts.get(host, 0) + 1})
        if declared.blames_host or host_blamed:
            run.host_faults = dict(run.host_faults, **{host: run.host_faults.get(host, 0) + 1})
        if run.restarts < max_restarts and hosts_left(run):
            run.restarts += 1
            ended = run.attempt
            _requeue_as_new_attempt(run, now)
            run.queue_reason = (
                f"attempt {ended} ended on {host} ({cause}: {reason}); "
                f"restart {run.restarts} of {max_restarts}{_resumes(run)}"
            )
            restarted = True
        elif run.restarts < max_restarts:
            reason += (
                "; not restarted: every host that fits failed this run"
                f" {FAILURES_BEFORE_AVOIDING} times"
            )
    if not restarted:
        run.exit_cause = cause
        run.exit_reason = reason
        run.transition_to(status, now)
    run.save()
    _release(run)
    if not restarted:
        _finished(run)


def _resumes(run: Run) -> str:
    """How a restart goes on: from what a capability kept (a stored checkpoint), or anew."""
    for capability in capabilities.of(run):
        kept = capability.resumes_from(run)
        if kept:
            return f" resumes from the last stored {kept}"
    return " starts over"


def _requeue_as_new_attempt(run: Run, now: datetime) -> None:
    run.transition_to(Run.Status.QUEUED, now)
    run.attempt += 1
    run.host = None
    run.device_indices = []
    run.cancel_requested = False
    run.exit_cause = exits.NONE
    run.exit_reason = ""
    run.exit_code = None
    run.exited_at = None
    run.result = {}
    run.queue_expires_at = None


@transaction.atomic
def do_restart_run(run_id: int, user: AbstractBaseUser) -> Run:
    """Start an ended run again as a new attempt (which resumes from what its capabilities
    kept: a training run's checkpoint)."""
    run = Run.objects.select_for_update().get(pk=run_id)
    if run.status not in Run.RESTARTABLE:
        raise Conflict(
            f"run {run.pk} is {run.status}; only a failed, cancelled, lost or expired run restarts"
        )
    now = timezone.now()
    _requeue_as_new_attempt(run, now)
    run.queue_reason = f"restarted by {user.get_username()} as attempt {run.attempt}"
    _audit(actions.RUN_RESTART, run, user, {"attempt": run.attempt})
    if run.wait_for_host:
        _, why = unplaceable(run, Host.objects.all())
        if why:
            _wait_for_host(run, why, now)
    run.save()
    transaction.on_commit(request_placement)
    return run


def _audit(action: str, run: Run, user: AbstractBaseUser | None, data: dict[str, Any]) -> None:
    """An audit entry of ``user``'s ``action`` on ``run``, in the change's transaction."""
    record(
        action,
        target_type=AUDIT_RUN,
        target_id=run.pk,
        target_label=f"#{run.pk} {run.kind}",
        user=user,
        data=data,
    )


def _finished(run: Run) -> None:
    """Tell the run's kind it ended (a failed stability verdict marks devices bad), once
    the final state is committed: never from inside a transaction that may yet roll back."""
    run_id = run.pk

    def notify() -> None:
        ended = Run.objects.select_related("host").filter(pk=run_id).first()
        if ended is None or ended.is_active:
            return
        try:
            get_kind(ended.kind).on_finished(ended)
        except Exception:  # the run has ended whatever a kind's hook does
            log.exception("the %s kind's on_finished failed for run %s", ended.kind, run_id)

    transaction.on_commit(notify)


def _release(run: Run) -> None:
    """Give the run's devices back, on every host, and let the scheduler use them."""
    Placement.objects.filter(run=run, state=Placement.State.LEASED).update(
        state=Placement.State.STOPPED, finished_at=timezone.now()
    )
    if DeviceLease.objects.filter(run=run).delete()[0]:
        transaction.on_commit(request_placement)


def do_attach_snapshot(host: Host, run_id: int, snapshot: Snapshot) -> None:
    """Point a run of ``host`` at the snapshot of the environment it is about to run in: its
    placement there, and the run itself when ``host`` is node rank 0's (the run's stack)."""
    placed = Placement.objects.filter(
        run_id=run_id,
        host=host,
        attempt=models.Subquery(Run.objects.filter(pk=run_id).values("attempt")[:1]),
    ).update(snapshot=snapshot)
    if not Run.objects.filter(pk=run_id, host=host).update(snapshot=snapshot) and not placed:
        raise PermissionDenied(f"run {run_id} is not placed on host {host.name}")
