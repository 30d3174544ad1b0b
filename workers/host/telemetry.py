"""The host worker's telemetry thread: sample every interval, send in batches.

What was sampled is sent every ``send_s`` (several rounds a request: the platform's cost is
per request), and at once when a device's health changes, so that an alarm is not held back.

While the platform cannot be reached the samples wait in a bounded in-memory
backlog (the oldest go first when it is full) and are sent, oldest first, once
it answers again. A failure streak is logged once when it starts and once when
it ends, with how many samples were dropped meanwhile; never once per attempt.
A worker restart loses the backlog: telemetry is a view of the recent past,
not a record the platform must hold completely (the run events are).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any, Callable

from workers import telemetry
from workers.contract import telemetry as contract
from workers.host.client import PlatformClient, PlatformRejected, PlatformUnavailable

log = logging.getLogger(__name__)

# Samples kept while the platform is away: about 6 hours of an 8-device host at 10 s.
MAX_BACKLOG = 20000


class TelemetrySender:
    """``tick`` is one round (sample, then send what waits); ``run`` repeats it until stopped."""

    def __init__(
        self,
        client: PlatformClient,
        device_type: str,
        indices: list[int],
        interval_s: float = contract.DEFAULT_INTERVAL_S,
        send_s: float = 0.0,
        max_backlog: int = MAX_BACKLOG,
        max_batch: int = contract.MAX_BATCH,
        sample: Callable[[str, list[int] | None], list[dict[str, Any]]] = telemetry.sample,
    ):
        self.client = client
        self.device_type = device_type
        self.indices = list(indices)
        self.interval_s = interval_s
        self.send_s = send_s  # 0: every round
        self.max_backlog = max(1, max_backlog)
        self.max_batch = max(1, min(max_batch, contract.MAX_BATCH))
        self._sample = sample
        self.backlog: collections.deque[dict[str, Any]] = collections.deque()
        self.sent = 0
        self.dropped = 0  # in the current failure streak
        self._failing = ""  # why the current streak started; "" while sending works
        self._failures = 0
        self._refused = 0  # samples refused (4xx) in the current streak
        self._sent_at: float | None = None  # monotonic time of the last successful send
        self._health: dict[Any, str] = {}  # each device's health in the newest round

    def tick(self) -> None:
        changed = self.collect()
        if self._due(changed):
            self.flush()

    def _due(self, health_changed: bool) -> bool:
        """Whether to send now: the first round, every ``send_s``, a health change, a full batch;
        and every round while the platform is failing, as before a streak."""
        return (
            health_changed
            or self._sent_at is None
            or self._failing != ""
            or len(self.backlog) >= self.max_batch
            or time.monotonic() - self._sent_at >= self.send_s
        )

    def collect(self) -> bool:
        """Take one round of samples into the backlog, dropping the oldest beyond its bound.

        True when a device's health differs from its previous round's (or is new).
        """
        changed = False
        for raw in self._sample(self.device_type, self.indices):
            try:
                sample = contract.validate_sample(raw)
            except contract.SampleInvalid as exc:
                # A sampler's bug: the platform would refuse it too.
                log.warning("telemetry: dropped a sample of device %s: %s", raw.get("index"), exc)
                continue
            self.backlog.append(sample)
            health = sample.get("health")
            if self._health.get(sample.get("index")) != health:
                changed = True
                self._health[sample.get("index")] = health
        excess = len(self.backlog) - self.max_backlog
        if excess <= 0:
            return changed
        if not self.dropped:
            log.warning(
                "telemetry: backlog full (%d samples); dropping the oldest until the platform "
                "is back",
                self.max_backlog,
            )
        self._pop(excess)
        self.dropped += excess
        return changed

    def flush(self) -> bool:
        """Send the backlog, oldest first, in batches; False when the platform is away."""
        while self.backlog:
            batch = [self.backlog[i] for i in range(min(self.max_batch, len(self.backlog)))]
            try:
                reply = self.client.telemetry(batch)
            except PlatformUnavailable as exc:
                self._failed(str(exc))
                return False
            except PlatformRejected as exc:
                # The same batch would be refused again (a bad token, a platform without
                # the endpoint): it is dropped so that newer samples can go.
                if not self._refused:
                    log.warning(
                        "telemetry: the platform refuses samples (%s); dropping them until "
                        "it takes them",
                        exc,
                    )
                self._refused += len(batch)
                self._pop(len(batch))
                continue
            self._pop(len(batch))
            self.sent += len(batch)
            self._sent_at = time.monotonic()
            self._recovered()
            if self._refused:
                log.warning(
                    "telemetry: the platform takes samples again; %d were refused",
                    self._refused,
                )
                self._refused = 0
            self._report_rejected(batch, reply)
        return True

    def run(self, stop: threading.Event) -> None:
        """Tick every ``interval_s`` until ``stop`` is set; a slow round does not pile up."""
        due = time.monotonic()
        while not stop.is_set():
            try:
                self.tick()
            except Exception:  # the thread must outlive any one round
                log.exception("telemetry round failed")
            due += self.interval_s
            now = time.monotonic()
            if due < now:
                due = now
            if stop.wait(due - now):
                break

    def _pop(self, count: int) -> None:
        for _ in range(count):
            self.backlog.popleft()

    def _failed(self, reason: str) -> None:
        self._failures += 1
        if not self._failing:
            self._failing = reason
            log.warning(
                "telemetry: cannot reach the platform (%s); keeping up to %d samples until "
                "it is back",
                reason,
                self.max_backlog,
            )

    def _recovered(self) -> None:
        if not self._failing:
            return
        log.warning(
            "telemetry: the platform is back after %d failed attempt(s); %d oldest sample(s) "
            "were dropped meanwhile (backlog limit %d)",
            self._failures,
            self.dropped,
            self.max_backlog,
        )
        self._failing = ""
        self._failures = 0
        self.dropped = 0

    @staticmethod
    def _report_rejected(batch: list[dict[str, Any]], reply: dict[str, Any]) -> None:
        rejected = reply.get("rejected") or []
        if not isinstance(rejected, list) or not rejected:
            return
        first = rejected[0] if isinstance(rejected[0], dict) else {}
        log.warning(
            "telemetry: the platform rejected %d of %d samples (first: sample %s, %s: %s)",
            len(rejected),
            len(batch),
            first.get("index"),
            first.get("field"),
            first.get("message"),
        )


def start(
    client: PlatformClient,
    device_type: str,
    indices: list[int],
    interval_s: float,
    stop: threading.Event,
    send_s: float = contract.DEFAULT_SEND_S,
) -> threading.Thread | None:
    """The telemetry thread, started; None when ``interval_s`` is 0 (telemetry off)."""
    if interval_s <= 0:
        log.info("telemetry is off (NPULAB_TELEMETRY_S=0)")
        return None
    sender = TelemetrySender(client, device_type, indices, interval_s, send_s=send_s)
    thread = threading.Thread(target=sender.run, args=(stop,), name="telemetry", daemon=True)
    thread.start()
    return thread
