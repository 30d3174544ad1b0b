"""What an earlier host worker process left undone: the ends of attempts that had ended.

A worker killed (or stopped before it was done) after one of its runs' supervisors had
exited leaves that attempt's end undone: its last events, the artifacts and checkpoints
it had not uploaded, and the report of how it ended. Left so, the platform takes the run
for lost once this worker registers, and a restartable run trains again what had already
succeeded. ``reap_orphans`` names the attempts left, and ``forward_left`` sends their
events before the worker registers; this finishes each one whose supervisor had ended by
itself: one that this process did not have to kill, whose spool ends with the
supervisor's result (the last thing a supervisor writes; nothing but the worker's own
notes may follow it). Its end is the one ``RunExecution.end`` gives a run: the rest of
its events, the artifacts it announced and were not stored (``workers.host.artifacts``
marks each one done), the capabilities' uploads (the checkpoints not yet uploaded), then
the report, with the exit code the result stands for. It runs in the background once the
worker has registered; until an attempt is reported its run is listed in the heartbeats,
so the platform does not take it for lost meanwhile. Any other attempt left is lost, as
its runs were killed.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any

from workers.contract import exits
from workers.contract.events import ARTIFACT, EVENTS_FILE, LEAST_BATCH_EVENTS, LOG, RESULT, RUNNER
from workers.events import parse_line, read_at
from workers.host.agent import SPEC_FILE, HostAgent, RunExecution
from workers.host.forwarder import attempt_of
from workers.safefiles import open_dir, open_file, read_text

log = logging.getLogger(__name__)

# How much of the spool's end is read for the supervisor's result.
TAIL_BYTES = 64 * 1024


class Ended:
    """An attempt left after its supervisor had ended: where, whose, and its result."""

    def __init__(self, run_dir: str, run_id: int, attempt: int, spec: dict[str, Any]):
        self.run_dir = run_dir
        self.run_id = run_id
        self.attempt = attempt
        self.spec = spec
        self.result: dict[str, Any] = {}
        self.exited_at = 0.0


def finish_left(agent: HostAgent, run_dirs: list[str]) -> threading.Thread | None:
    """Finish, in a thread of their own, those of ``run_dirs`` (attempts left behind whose
    supervisor was no longer alive) that had ended by themselves; their runs are listed as
    running until each is reported. The thread, or None when none had ended."""
    ended = [found for found in map(ended_attempt, run_dirs) if found is not None]
    if not ended:
        return None
    agent.list_as_running([each.run_id for each in ended])
    thread = threading.Thread(target=_finish_all, args=(agent, ended), name="left", daemon=True)
    thread.start()
    return thread


def ended_attempt(run_dir: str) -> Ended | None:
    """The attempt in ``run_dir`` if its supervisor had ended by itself, else None."""
    ids = attempt_of(run_dir)
    if ids is None:
        return None
    try:
        folder = open_dir(run_dir)
    except OSError:
        return None
    try:
        spec = json.loads(read_text(SPEC_FILE, dir_fd=folder))
        spool = open_file(EVENTS_FILE, os.O_RDONLY, dir_fd=folder)
    except (OSError, ValueError):
        return None
    finally:
        os.close(folder)
    try:
        result = _last_result(spool)
        if result is None or not isinstance(spec, dict) or "kind" not in spec:
            return None
        found = Ended(run_dir, *ids, spec)
        found.result = result
        found.exited_at = os.fstat(spool).st_mtime
        return found
    finally:
        os.close(spool)


def _last_result(spool: int) -> dict[str, Any] | None:
    """The supervisor's result, if it is the spool's last event but the worker's notes."""
    size = os.fstat(spool).st_size
    start = max(0, size - TAIL_BYTES)
    lines = (read_at(spool, start, size - start) or b"").split(b"\n")
    if start:
        lines = lines[1:]  # the first is cut
    for raw in reversed(lines):
        if not raw.strip():
            continue
        event = parse_line(raw + b"\n")
        if event.get("type") == LOG and event.get("stream") == RUNNER:
            continue
        return event if event.get("type") == RESULT else None
    return None


def _finish_all(agent: HostAgent, ended: list[Ended]) -> None:
    for each in ended:
        try:
            _finish(agent, each)
        except Exception:  # one attempt's failure must not leave the others undone
            log.exception("run %s: the end an earlier worker process left failed", each.run_id)
        finally:
            agent.unlist(each.run_id)


def _finish(agent: HostAgent, ended: Ended) -> None:
    log.warning(
        "run %s attempt %s ended (%s) before an earlier worker process reported it: finishing it",
        ended.run_id,
        ended.attempt,
        ended.result.get("status"),
    )
    claim = {"spec": ended.spec, "max_events": LEAST_BATCH_EVENTS}
    execution = RunExecution(agent, ended.run_id, ended.attempt, claim)
    execution.capabilities = execution.make_capabilities()
    forwarder = execution.make_forwarder()
    try:
        # Read here, in the background, not at the start: a spool may be gigabytes.
        for event in forwarder.events_of(ARTIFACT):
            execution.artifacts.add(event)
        succeeded = ended.result.get("status") == exits.SUCCEEDED
        code = exits.EXIT_SUCCEEDED if succeeded else exits.EXIT_FAILED
        execution.end(forwarder, {"exit_code": code, "exited_at": ended.exited_at})
    finally:
        forwarder.close()
