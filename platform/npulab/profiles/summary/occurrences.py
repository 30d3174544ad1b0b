"""Events counted by name: how often, for how long in all, and where the longest one was.

The longest occurrence's start and lane are what a finding links to in the timeline.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class Occurrences:
    """name -> [count, total, longest, its ts, its lane]; ``limit`` bounds the names kept."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.rows: dict[str, list] = {}

    def add(self, name: str, ts: float, dur: float, lane: tuple) -> None:
        row = self.rows.get(name)
        if row is None:
            if self.limit is None or len(self.rows) < self.limit:
                self.rows[name] = [1, dur, dur, ts, lane]
            return
        row[0] += 1
        row[1] += dur
        if dur > row[2]:
            row[2], row[3], row[4] = dur, ts, lane

    def merge(self, other: Occurrences) -> None:
        for name, (count, total, longest, ts, lane) in other.rows.items():
            row = self.rows.get(name)
            if row is None:
                self.rows[name] = [count, total, longest, ts, lane]
                continue
            row[0] += count
            row[1] += total
            if longest > row[2]:
                row[2], row[3], row[4] = longest, ts, lane

    def each(self) -> Iterator[tuple[str, int, float, float, float, dict[str, Any]]]:
        """(name, count, total, longest, its ts, its lane as the timeline names it)."""
        for name, (count, total, longest, ts, lane) in self.rows.items():
            yield name, count, total, longest, ts, lane_dict(lane)


def lane_dict(lane: tuple) -> dict[str, str]:
    """A lane as the timeline names it: the trace's pid and tid, as text."""
    return {"pid": str(lane[0]), "tid": str(lane[1])}
