"""Forward a run's events.jsonl to the platform, exactly once and in order.

The file is the spool. The forwarder sends batches that start at the
offset the platform last acknowledged and persists that offset next to the
file, so a platform outage, a restart of the host worker or a lost response
never loses or duplicates an event: the platform applies a batch only if it
starts where the previous one ended, and answers with the offset it holds.

It ships like a streaming log shipper: ``wait`` polls the file (often while
it grows, backing off while it does not) until a batch is worth a request
(``min_bytes`` waiting, or lines ``linger_s`` old), and ``pump`` sends it;
what arrived while one request was in flight is the next batch, sent as soon
as its reply comes. While a backlog of a whole batch waits, the next batch is
read and packed while the request of this one is in flight, so the host's
packing and the platform's storing overlap. The lines travel as the file's
own bytes, their runs of metric lines packed as columns
(workers.host.packing): only those, and the
events the host acts on once they are acknowledged (artifacts, and the types
its capabilities name: checkpoints), are parsed here. A platform from before
the compact form gets the lines as they are (NDJSON), one from before that a
JSON array.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from typing import Any, Callable, NamedTuple

from workers.contract.events import ARTIFACT, EVENTS_FILE, LEAST_BATCH_EVENTS
from workers.events import EventWriter, parse_line, read_at, read_batch, read_lines
from workers.host.client import PlatformClient, PlatformRejected, PlatformUnavailable
from workers.host.packing import pack
from workers.safefiles import fd_path, open_dir, open_file, read_text, write_whole

log = logging.getLogger(__name__)

OFFSET_FILE = "forwarded.offset"
# A batch at most this big (well under the platform's and a proxy's request limits), and
# at most as many lines as the platform takes (``max_batch_events``; a platform that does
# not say gets UNSTATED_BATCH_EVENTS, as before it said) ...
MAX_BATCH_BYTES = 1 << 20
MAX_BATCH_EVENTS = 10000
UNSTATED_BATCH_EVENTS = 5000
# ... and sent as soon as this much waits, or its lines have waited LINGER_S.
MIN_BATCH_BYTES = 64 * 1024
LINGER_S = 0.05
# How often ``wait`` looks at the file: at once again while it grows, then less often.
POLL_MIN_S, POLL_MAX_S = 0.005, 0.1
# The platform's answer to a body type it does not know: it predates the lines form.
_UNSUPPORTED_MEDIA_TYPE = 415
# How much of the spool ``events_of`` reads at a time.
SCAN_BYTES = 8 << 20
# An attempt's folder under its run's: runs/<run id>/attempt-<n>.
ATTEMPT_PREFIX = "attempt-"
# The most a restarted worker spends sending what an earlier process left unsent, before
# it registers (``forward_left``).
LEFT_GIVE_UP_S = 60.0


class RunGone(Exception):
    """The platform no longer wants this run attempt's events (cancelled, lost, deleted)."""


def max_batch_events(claim: dict[str, Any]) -> int:
    """The ``Forwarder``'s ``max_events`` within what the platform said, in its claim reply,
    one batch may hold: an operator may set it as low as 100 lines, and a batch over it is
    refused like a run the platform no longer wants. A platform from before the field gets
    the limit the forwarder kept to then."""
    said = claim.get("max_events")
    if type(said) is not int or said < 1:
        return UNSTATED_BATCH_EVENTS
    return min(said, MAX_BATCH_EVENTS)


class Batch(NamedTuple):
    """Whole lines of the file from ``start`` to ``end``, and their frames when packed."""

    start: int
    end: int
    data: bytes
    frames: bytes
    # Points that went as blocks: 0 when the batch goes as its lines.
    packed: int


class Forwarder:
    """Ships one run attempt's events: ``wait`` then ``pump`` while the run lives (one
    round each), ``drain`` once it has ended."""

    def __init__(
        self,
        client: PlatformClient,
        run_id: int,
        attempt: int,
        run_dir: str,
        poll_s: float = 1.0,
        max_events: int = MAX_BATCH_EVENTS,
        max_bytes: int = MAX_BATCH_BYTES,
        min_bytes: int = MIN_BATCH_BYTES,
        linger_s: float = LINGER_S,
        acted_on: tuple[str, ...] = (),
    ):
        self.client = client
        self.run_id = run_id
        self.attempt = attempt
        # The folder and the spool are held from here on (OSError if either name is a
        # link): the run's user may rename, replace or link them while it runs, and the
        # worker, often root, must read only the spool the supervisor writes.
        self._dir = open_dir(run_dir)
        # The attempt's folder as it was made, whatever the run makes of its name.
        self.folder = fd_path(self._dir)
        try:
            self._spool = open_file(
                EVENTS_FILE, os.O_RDWR | os.O_APPEND | os.O_CREAT, dir_fd=self._dir
            )
        except OSError:
            os.close(self._dir)
            raise
        self.poll_s = poll_s
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.min_bytes = min_bytes
        self.linger_s = linger_s
        # Events of these types are parsed from the lines: the events the host acts on.
        self._types = {ARTIFACT, *acted_on}
        self._needles = tuple(f'"{name}"'.encode() for name in sorted(self._types))
        # Lines go as the file's bytes until the platform says it takes only the JSON form,
        # their metrics packed until it says it does not take the compact form.
        self.lines = True
        self.compact = True
        self._compact_sent = False
        self.offset = self._load_offset()
        # When bytes past the offset were first seen waiting (None: none were).
        self._waiting_since: float | None = None
        # The file's size when all that waited was a line without its newline.
        self._unfinished_at = -1
        self.cancel_requested = False
        # The platform's last reply (what a capability reads: the checkpoint steps to keep).
        self.reply: dict[str, Any] = {}
        self._acknowledged: list[dict[str, Any]] = []
        self._last_contact = 0.0
        # The next batch, read and packed while the previous one was in flight.
        self._ahead: Batch | None = None

    def pump(self) -> bool:
        """Send what is complete now (or an empty poll when due). True if something was sent.

        Raises PlatformUnavailable when the platform cannot be reached and
        RunGone when it refuses the attempt.
        """
        sent_at, start = time.monotonic(), self.offset
        batch, self._ahead = self._ahead, None
        if not self.lines:
            batch = Batch(start, start, b"", b"", 0)
        elif batch is None or batch.start != start or (batch.packed and not self.compact):
            # Nothing read ahead, or read for an offset or a form the platform did not take.
            batch = self._batch(start)
        data, end = batch.data, batch.end
        events: list[dict[str, Any]] = []
        if not data:
            # The JSON form: an empty poll, a platform without the lines form, or one
            # line longer than a batch (it goes cut, as a log line says).
            events, end = read_batch(self._spool, self.offset, self.max_events, self.max_bytes)
        if end == start:
            # Only an unfinished line waits: not worth a look again until the file grows.
            self._unfinished_at = self._size()
            if sent_at - self._last_contact < self.poll_s:
                return False
        try:
            self._compact_sent = False
            if data:
                reply = self._send(batch)
                events = events_among(data, self._needles)
            else:
                reply = self.client.send_events(self.run_id, self.attempt, start, end, events)
        except PlatformRejected as exc:
            return self._refused(exc)
        self._last_contact = time.monotonic()
        self.cancel_requested = bool(reply.get("cancel"))
        self.reply = reply
        self._collect(events)
        self._save_offset(int(reply.get("ack", end)))
        # What came while it was in flight has waited since the request began at most.
        self._waiting_since = sent_at if self._size() > self.offset else None
        return end > start

    def _batch(self, start: int) -> Batch:
        data, end = read_lines(self._spool, start, self.max_events, self.max_bytes)
        frames, packed = pack(data) if self.compact and data else (b"", 0)
        return Batch(start, end, data, frames, packed)

    def _send(self, batch: Batch) -> dict[str, Any]:
        ahead = self._read_ahead(batch.end)
        try:
            if batch.packed:
                self._compact_sent = True
                return self.client.send_blocks(
                    self.run_id, self.attempt, batch.start, batch.end, batch.frames
                )
            return self.client.send_lines(
                self.run_id, self.attempt, batch.start, batch.end, batch.data
            )
        finally:
            if ahead is not None:
                ahead.join()

    def _read_ahead(self, start: int) -> threading.Thread | None:
        """A thread reading and packing the batch after this one while it is in flight, when
        a whole batch waits: the platform's reply is then answered with the next request at
        once, not after the host's packing. The batch is used only if the reply acknowledges
        up to ``start`` (``pump``); the offsets stay the platform's."""
        if self._size() - start < self.max_bytes:
            return None

        def read() -> None:
            try:
                self._ahead = self._batch(start)
            except OSError as exc:
                # Read again, and the error met, by the next round.
                log.debug("run %s: reading ahead failed: %s", self.run_id, exc)

        thread = threading.Thread(target=read, name=f"events-ahead-{self.run_id}", daemon=True)
        thread.start()
        return thread

    def _refused(self, exc: PlatformRejected) -> bool:
        if exc.status == _UNSUPPORTED_MEDIA_TYPE and self._compact_sent:
            log.info("run %s: the platform takes no compact events", self.run_id)
            self.compact = False
            return True
        if exc.status == _UNSUPPORTED_MEDIA_TYPE and self.lines:
            log.info("run %s: the platform takes events only as JSON", self.run_id)
            self.lines = False
            return True
        expected = exc.body.get("expected_start")
        if exc.status == 409 and isinstance(expected, int):
            # The platform holds a different offset (a reply was lost):
            # resume from what it has.
            log.info("run %s: resuming events from offset %s", self.run_id, expected)
            if expected > self.offset:
                # It stored those bytes from us: their events are acknowledged.
                self._collect(events_among(self._read(self.offset, expected), self._needles))
            self._save_offset(expected)
            return True
        raise RunGone(str(exc)) from exc

    def due(self) -> bool:
        """True when a batch is worth a request now, or the platform is due an empty poll."""
        now = time.monotonic()
        size = self._size()
        waiting = size - self.offset
        if waiting <= 0 or size == self._unfinished_at:
            self._waiting_since = None
            return now - self._last_contact >= self.poll_s
        if self._waiting_since is None:
            self._waiting_since = now
        return waiting >= self.min_bytes or now - self._waiting_since >= self.linger_s

    def wait(self, timeout: float, stop: Callable[[], bool] = lambda: False) -> bool:
        """Sleep until ``due``, ``stop()`` or ``timeout`` seconds; returns ``due()``.

        The file is looked at every few milliseconds while it grows and less
        often while it does not, so a quiet run costs next to nothing and the
        first lines after a pause are seen quickly.
        """
        deadline = time.monotonic() + timeout
        interval = POLL_MIN_S
        size = self._size()
        while not self.due():
            now = time.monotonic()
            if now >= deadline or stop():
                return False
            pause = min(interval, deadline - now)
            if self._waiting_since is not None:
                pause = min(pause, max(0.0, self._waiting_since + self.linger_s - now))
            time.sleep(pause)
            grown = self._size()
            interval = POLL_MIN_S if grown != size else min(interval * 2, POLL_MAX_S)
            size = grown
        return True

    def _collect(self, events: list[dict]) -> None:
        # A line that only mentions a type (a log line quoting one) is not one of them.
        self._acknowledged += [event for event in events if event.get("type") in self._types]

    def take_acknowledged(self) -> list[dict[str, Any]]:
        """The acted-on events (artifacts, the capabilities' types) the platform acknowledged
        since the last call, in order."""
        events, self._acknowledged = self._acknowledged, []
        return events

    def pending(self) -> bool:
        """True while the file holds bytes the platform has not acknowledged."""
        return self._size() > self.offset

    def drain(self, give_up: threading.Event | None = None, until: float | None = None) -> bool:
        """Send everything, retrying through outages for as long as it takes; True once
        everything is sent.

        Called once the run's processes have exited: a last line they left
        without its newline (a writer killed mid-line, a script writing to
        the file by hand) will never be finished, so it is sealed and goes
        out as the visible log line a malformed line becomes, rather than
        being waited for for ever. Once ``give_up`` is set (the worker is
        shutting down) the retries stop within a few seconds with
        PlatformUnavailable; the events stay spooled on disk. At ``until`` (a
        ``time.monotonic()`` value) it stops, sending or retrying, with False.
        """
        self._seal()
        stop = give_up or threading.Event()
        delay = 0.2
        while True:
            if until is not None and time.monotonic() >= until:
                return False
            try:
                self.pump()
                if not self.pending():
                    return True
                delay = 0.2
            except PlatformUnavailable as exc:
                if stop.is_set():
                    raise
                log.warning("run %s: platform unavailable, retrying: %s", self.run_id, exc)
                stop.wait(delay)
                delay = min(delay * 2, 2.0)

    def events_of(self, event_type: str) -> list[dict[str, Any]]:
        """Every event of ``event_type`` in the whole spool, in order; the other lines are
        never decoded (an attempt an earlier worker process left: its artifacts)."""
        found: list[dict[str, Any]] = []
        needles = (f'"{event_type}"'.encode(),)
        offset = 0
        while True:
            data, end = read_lines(self._spool, offset, SCAN_BYTES, SCAN_BYTES)
            if not data:
                return found
            found += [e for e in events_among(data, needles) if e.get("type") == event_type]
            offset = end

    def writer(self) -> EventWriter:
        """A writer of the worker's own lines into the spool this forwarder reads, whatever
        the run did to its name."""
        return EventWriter(EVENTS_FILE, descriptor=os.dup(self._spool))

    def close(self) -> None:
        """Let go of the folder and the spool (once the attempt is done with)."""
        for descriptor in (self._spool, self._dir):
            with contextlib.suppress(OSError):
                os.close(descriptor)
        self._spool = self._dir = -1

    def _seal(self) -> None:
        size = self._size()
        if size <= self.offset or os.pread(self._spool, 1, size - 1) == b"\n":
            return
        log.warning("run %s: the last line of %s had no newline", self.run_id, EVENTS_FILE)
        os.write(self._spool, b"\n")

    def _size(self) -> int:
        return os.fstat(self._spool).st_size

    def _read(self, start: int, stop: int) -> bytes:
        return read_at(self._spool, start, stop - start) or b""

    def _load_offset(self) -> int:
        try:
            return int(read_text(OFFSET_FILE, dir_fd=self._dir).strip() or 0)
        except (OSError, ValueError):
            return 0

    def _save_offset(self, offset: int) -> None:
        self.offset = offset
        write_whole(OFFSET_FILE, str(offset).encode("ascii"), dir_fd=self._dir)


def forward_left(
    client: PlatformClient, run_dirs: list[str], give_up_after_s: float = LEFT_GIVE_UP_S
) -> None:
    """Send what the attempts an earlier worker process left (``reap_orphans``) had not.

    Their runs wrote on after that process died, until this one killed them; those
    lines would otherwise never reach the platform, which marks the runs lost once this
    worker registers, so this comes first. Batches are the smallest a platform takes (the
    claim that said how many this one may send was the earlier process's). A platform
    that no longer wants an attempt's events ends that attempt's sending. All of it
    takes ``give_up_after_s`` at most, whether the platform cannot be reached or a run
    flooded its file meanwhile: what is not sent by then stays spooled on disk. Nothing
    is acted on here: what else an attempt that had ended left undone is
    ``workers.host.left``'s.
    """
    until = time.monotonic() + give_up_after_s
    for run_dir in run_dirs:
        ids = attempt_of(run_dir)
        if ids is None:
            continue
        run_id, attempt = ids
        try:
            forwarder = Forwarder(client, run_id, attempt, run_dir, max_events=LEAST_BATCH_EVENTS)
        except OSError as exc:
            # The run left a link in place of its folder or its spool: nothing to send.
            log.warning("run %s: its events cannot be read: %s", run_id, exc)
            continue
        try:
            if not forwarder.pending():
                continue
            before = forwarder.offset
            sent = forwarder.drain(until=until)
        except RunGone as exc:
            log.info("run %s: the platform takes no more of its events: %s", run_id, exc)
            continue
        finally:
            forwarder.close()
        log.warning(
            "run %s: sent %d bytes of events an earlier worker process had not%s",
            run_id,
            forwarder.offset - before,
            ""
            if sent
            else f" in the {give_up_after_s:g} s a start gives them; the rest stays spooled",
        )


def attempt_of(run_dir: str) -> tuple[int, int] | None:
    """The run id and attempt number of an attempt's folder (``runs/<id>/attempt-<n>``)."""
    folder = os.path.basename(run_dir)
    run_id = os.path.basename(os.path.dirname(run_dir))
    attempt = folder[len(ATTEMPT_PREFIX) :]
    if not (folder.startswith(ATTEMPT_PREFIX) and run_id.isdigit() and attempt.isdigit()):
        return None
    return int(run_id), int(attempt)


def events_among(data: bytes, needles: tuple[bytes, ...]) -> list[dict[str, Any]]:
    """The events among ``data``'s lines that may be of the acted-on types, parsed (the
    caller checks each one's type).

    Only a line with one of ``needles`` (``"artifact"``, ``"checkpoint"``) in it can be
    one; the others (almost all: metrics, logs) are never decoded.
    """
    starts = set()
    for needle in needles:
        at = data.find(needle)
        while at >= 0:
            starts.add(data.rfind(b"\n", 0, at) + 1)
            at = data.find(needle, at + len(needle))
    events = []
    for start in sorted(starts):
        stop = data.find(b"\n", start)
        events.append(parse_line(data[start : len(data) if stop < 0 else stop + 1]))
    return events
