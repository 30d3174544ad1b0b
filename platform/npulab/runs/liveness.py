"""Since when the control plane has been able to hear its hosts.

A running run is lost when nothing was heard of it for NPULAB_RUN_HEARTBEAT_TIMEOUT_S.
While the database (or the control worker itself) was down, nobody could be heard: the
heartbeats of that time were refused, not missed. So the silence counts from when the
sweeps work again, or every run in flight would be called lost the moment the platform
came back from an outage longer than the timeout.
"""

from __future__ import annotations

from datetime import datetime, timedelta


class Hearing:
    """The sweeps of one control worker process: when the current stretch of them began."""

    def __init__(self) -> None:
        self._last: datetime | None = None
        self._since: datetime | None = None

    def since(self, now: datetime, gap: timedelta) -> datetime:
        """When the sweeps without a gap longer than ``gap`` began, ``now`` included."""
        if self._since is None or self._last is None or now - self._last > gap:
            self._since = now
        return self._since

    def heard(self, now: datetime) -> None:
        """The sweep that started at ``now`` succeeded."""
        self._last = now
