"""Forward a run's events.jsonl to the platform, exactly once and in order.

The file is the spool. The forwarder sends batches that start at the
offset the platform last acknowledged and persists that offset next to the
file, so a platform outage, a restart of the host worker or a lost response
never loses or duplicates an event: the platform applies a batch only if it
starts where the previous one ended, and answers with the offset it holds.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from workers.contract.events import ARTIFACT, EVENTS_FILE
from workers.events import read_batch
from workers.host.client import PlatformClient, PlatformRejected, PlatformUnavailable

log = logging.getLogger(__name__)

OFFSET_FILE = "forwarded.offset"


class RunGone(Exception):
    """The platform no longer wants this run attempt's events (cancelled, lost, deleted)."""


class Forwarder:
    """Ships one run attempt's events; ``pump`` is one round, ``drain`` ships all."""

    def __init__(
        self,
        client: PlatformClient,
        run_id: int,
        attempt: int,
        run_dir: str,
        poll_s: float = 1.0,
        max_events: int = 5000,
    ):
        self.client = client
        self.run_id = run_id
        self.attempt = attempt
        self.events_path = os.path.join(run_dir, EVENTS_FILE)
        self.offset_path = os.path.join(run_dir, OFFSET_FILE)
        self.poll_s = poll_s
        self.max_events = max_events
        self.offset = self._load_offset()
        self.cancel_requested = False
        # What the platform said with its last reply: checkpoint steps to keep.
        self.pinned: list[int] | None = None
        self._checkpoints: list[int] = []
        self._artifacts: list[dict] = []
        self._last_contact = 0.0

    def pump(self) -> bool:
        """Send what is new (or an empty poll when due). True if something was sent.

        Raises PlatformUnavailable when the platform cannot be reached and
        RunGone when it refuses the attempt.
        """
        events, end = read_batch(self.events_path, self.offset, self.max_events)
        if not events and time.monotonic() - self._last_contact < self.poll_s:
            return False
        try:
            reply = self.client.send_events(self.run_id, self.attempt, self.offset, end, events)
        except PlatformRejected as exc:
            expected = exc.body.get("expected_start")
            if exc.status == 409 and isinstance(expected, int):
                # The platform holds a different offset (a reply was lost):
                # resume from what it has.
                log.info("run %s: resuming events from offset %s", self.run_id, expected)
                if expected > self.offset:
                    # It stored those bytes from us: their checkpoints are acknowledged.
                    held, _ = read_batch(
                        self.events_path, self.offset, self.max_events, expected - self.offset
                    )
                    self._collect_checkpoints(held)
                self._save_offset(expected)
                return True
            raise RunGone(str(exc)) from exc
        self._last_contact = time.monotonic()
        self.cancel_requested = bool(reply.get("cancel"))
        if isinstance(reply.get("pinned"), list):
            self.pinned = reply["pinned"]
        self._collect_checkpoints(events)
        self._save_offset(int(reply.get("ack", end)))
        return bool(events)

    def _collect_checkpoints(self, events: list[dict]) -> None:
        self._checkpoints += [
            event["step"]
            for event in events
            if event.get("type") == "checkpoint" and isinstance(event.get("step"), int)
        ]
        self._artifacts += [event for event in events if event.get("type") == ARTIFACT]

    def take_checkpoints(self) -> list[int]:
        """Steps of the checkpoint events the platform acknowledged since the last call."""
        steps, self._checkpoints = self._checkpoints, []
        return steps

    def take_artifacts(self) -> list[dict]:
        """The artifact events the platform acknowledged since the last call."""
        events, self._artifacts = self._artifacts, []
        return events

    def pending(self) -> bool:
        """True while the file holds bytes the platform has not acknowledged."""
        try:
            return os.path.getsize(self.events_path) > self.offset
        except FileNotFoundError:
            return False

    def drain(self, give_up: threading.Event | None = None) -> None:
        """Send everything, retrying through outages for as long as it takes.

        Called once the run's processes have exited: a last line they left
        without its newline (a writer killed mid-line, a script writing to
        the file by hand) will never be finished, so it is sealed and goes
        out as the visible log line a malformed line becomes, rather than
        being waited for for ever. Once ``give_up`` is set (the worker is
        shutting down) the retries stop within a few seconds with
        PlatformUnavailable; the events stay spooled on disk.
        """
        self._seal()
        stop = give_up or threading.Event()
        delay = 0.2
        while True:
            try:
                self.pump()
                if not self.pending():
                    return
                delay = 0.2
            except PlatformUnavailable as exc:
                if stop.is_set():
                    raise
                log.warning("run %s: platform unavailable, retrying: %s", self.run_id, exc)
                stop.wait(delay)
                delay = min(delay * 2, 2.0)

    def _seal(self) -> None:
        try:
            with open(self.events_path, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                if handle.tell() <= self.offset:
                    return
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) == b"\n":
                    return
        except FileNotFoundError:
            return
        log.warning("run %s: the last line of %s had no newline", self.run_id, EVENTS_FILE)
        with open(self.events_path, "ab") as handle:
            handle.write(b"\n")

    def _load_offset(self) -> int:
        try:
            with open(self.offset_path) as handle:
                return int(handle.read().strip() or 0)
        except (OSError, ValueError):
            return 0

    def _save_offset(self, offset: int) -> None:
        self.offset = offset
        temporary = self.offset_path + ".tmp"
        with open(temporary, "w") as handle:
            handle.write(str(offset))
        os.replace(temporary, self.offset_path)
