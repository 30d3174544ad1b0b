"""Following a run: how it ended as a CLI exit code, waiting for it, its log.

A CI job gates on these codes (docs/cli.md): the mapping lives here once and
uses the contract's names, never bare numbers.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from workers.cli.client import ApiError, Client
from workers.contract import exits
from workers.contract.diagnosis import HOST_BLAMES, STACK

SUCCEEDED, FAILED, CANCELLED, LOST = "succeeded", "failed", "cancelled", "lost"
# Waited for a host that could take it (wait_for_host) and none came in time.
EXPIRED = "expired"
# A training run between attempts is "queued" again: only these end it for good.
TERMINAL = (SUCCEEDED, FAILED, CANCELLED, LOST, EXPIRED)
# The words --json and the JUnit report use for each exit code.
OUTCOMES = {
    exits.CLI_SUCCEEDED: "succeeded",
    exits.CLI_JOB_FAILED: "failed",
    exits.CLI_INFRASTRUCTURE: "infrastructure_failure",
    exits.CLI_GAVE_UP: "gave_up",
    exits.CLI_CANCELLED: "cancelled",
    exits.CLI_STACK_FAILED: "stack_failure",
}
LOG_PAGE = 500
# While waiting, the platform may be unreachable this long (a web restart, a
# deploy) before the CLI gives up with CLI_UNREACHABLE.
OUTAGE_GRACE_S = 120.0


def exit_code(run: dict[str, Any]) -> int | None:
    """The CLI exit code for a run that ended; None while it has not."""
    status = run.get("status")
    if status not in TERMINAL:
        return None
    if status == SUCCEEDED:
        return exits.CLI_SUCCEEDED
    if status == CANCELLED:
        return exits.CLI_CANCELLED
    # The platform, not the job, failed: lost, worker gone, could not start, no
    # host came for it. A run killed at its timeout on the host counts too: a
    # hung device or collective is the usual cause, and a retry is what a
    # pipeline should do (docs/cli.md).
    if (
        status in (LOST, EXPIRED)
        or run.get("infrastructure_failure")
        or run.get("exit_cause") == exits.TIMEOUT
    ):
        return exits.CLI_INFRASTRUCTURE
    # The diagnosis says whose failure it was: the host's hardware or network is as
    # safe to retry as a lost worker; the stack's is not the script's either.
    blame = (run.get("diagnosis") or {}).get("blame")
    if blame in HOST_BLAMES:
        return exits.CLI_INFRASTRUCTURE
    if blame == STACK:
        return exits.CLI_STACK_FAILED
    return exits.CLI_JOB_FAILED


def poll_interval(elapsed: float) -> float:
    """Quick at first (smoke runs take seconds), then gentle on the server."""
    return 0.5 if elapsed < 60 else 2.0


def new_logs(
    client: Client, run_id: int, after: int, emit: Callable[[dict[str, Any]], None]
) -> int:
    """Hand every log event after event id ``after`` to ``emit``; return the last id seen."""
    while True:
        page = client.get(f"runs/{run_id}/events/", type="log", after=after or None, limit=LOG_PAGE)
        events = page.get("results", [])
        for event in events:
            emit(event)
            after = max(after, int(event["id"]))
        if not page.get("next") or not events:
            return after


def log_tail(client: Client, run_id: int, lines: int) -> list[dict[str, Any]]:
    """The run's last ``lines`` log events, oldest first."""
    if lines <= 0:
        return []
    count = client.get(f"runs/{run_id}/events/", type="log", limit=1).get("count", 0)
    offset = max(0, int(count) - lines)
    page = client.get(f"runs/{run_id}/events/", type="log", limit=lines, offset=offset)
    return list(page.get("results", []))


def wait(
    client: Client,
    run_id: int,
    timeout: float | None = None,
    on_update: Callable[[dict[str, Any], float], None] | None = None,
    on_log: Callable[[dict[str, Any]], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[dict[str, Any], int]:
    """Poll until the run ends or ``timeout`` passes: (the run as last seen, CLI exit code).

    ``on_log`` gets each log event as it arrives (``--follow``); since the
    platform records the end only once every event is stored, reading the logs
    after the run is seen ended reads them all.
    """
    start = last_ok = clock()
    after = 0
    run: dict[str, Any] | None = None
    while True:
        try:
            run = client.get(f"runs/{run_id}/")
            if on_log is not None:
                after = new_logs(client, run_id, after, on_log)
            last_ok = clock()
        except ApiError as error:
            # A refusal (bad token, no such run) will not change; an outage might.
            if not error.transient or clock() - last_ok > OUTAGE_GRACE_S or run is None:
                raise
        elapsed = clock() - start
        if on_update is not None:
            on_update(run, elapsed)
        code = exit_code(run)
        if code is not None:
            return run, code
        if timeout is not None and elapsed >= timeout:
            return run, exits.CLI_GAVE_UP
        pause = poll_interval(elapsed)
        if timeout is not None:
            pause = max(0.0, min(pause, timeout - elapsed))
        sleep(pause)
