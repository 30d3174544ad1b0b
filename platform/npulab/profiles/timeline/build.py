"""One streaming pass over a trace into the timeline's SQLite index.

The file holds:

- ``lanes``: one per (pid, tid), named from the trace's ``M`` metadata events; a lane is
  a ``stream`` (device kernels, copies) or a ``thread`` (CPU ops);
- ``events``: every drawable event (complete ``X`` events, ``B``/``E`` pairs, instants),
  with its duration class ``dclass = floor(log2(dur))`` (0 below 2 µs), indexed on
  (lane, dclass, start): the events of a class last less than ``2 ** (dclass + 1)``, so
  those overlapping [t0, t1] start in [t0 - 2 ** (dclass + 1), t1] and a window is one
  index range per class, however long the trace's longest event;
- ``buckets``: per lane and level L, slots of ``4 ** L`` µs from the trace's start with
  the count and summed duration of the events shorter than a slot. At resolution r µs a
  pixel, the events at least as long as the coarsest slot not over r are sent one by
  one and the rest as busy buckets, so a window never sends more than a few items per
  pixel and lane, whatever the trace's size;
- ``names``, ``categories``: each distinct string once, with counts for the search;
- ``meta``: the trace's span, counts and the index's format version.

Memory stays bounded: events go to the file in batches; only the distinct names, the
lanes and the open ``B`` events are kept, and the buckets are aggregated by SQLite.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import time
from collections.abc import Iterable
from typing import Any

INDEX_NAME = "timeline.sqlite"
FORMAT_VERSION = 1
# A slot of level L is 4 ** L µs wide; below 4 µs a pixel every event is sent.
LEVEL_BASE = 4
BATCH = 20_000
# What one hostile event may cost the index: a name, and its args as JSON.
MAX_NAME = 512
MAX_ARGS = 4096

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE lanes (
    id INTEGER PRIMARY KEY, pid TEXT NOT NULL, tid TEXT NOT NULL, kind TEXT NOT NULL,
    name TEXT NOT NULL, process TEXT NOT NULL, sort INTEGER NOT NULL,
    events INTEGER NOT NULL, max_dclass INTEGER NOT NULL
);
CREATE TABLE names (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL, count INTEGER NOT NULL, total REAL NOT NULL
);
CREATE TABLE categories (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE events (
    id INTEGER PRIMARY KEY, lane INTEGER NOT NULL, dclass INTEGER NOT NULL,
    start REAL NOT NULL, dur REAL NOT NULL, name INTEGER NOT NULL, cat INTEGER NOT NULL,
    args TEXT
);
CREATE TABLE buckets (
    lane INTEGER NOT NULL, level INTEGER NOT NULL, slot INTEGER NOT NULL,
    count INTEGER NOT NULL, busy REAL NOT NULL,
    PRIMARY KEY (lane, level, slot)
) WITHOUT ROWID;
"""
INDEXES = """
CREATE INDEX events_window ON events (lane, dclass, start);
CREATE INDEX events_name ON events (name, start);
"""

# The device side of a trace, by the names Kineto and torch_npu give its processes/threads.
DEVICE_WORDS = ("stream", "gpu", "npu", "ascend hardware", "device", "cuda")


def dclass(dur: float) -> int:
    """The duration class: events of class k last less than 2 ** (k + 1) µs."""
    return 0 if dur < 2 else int(math.log2(dur))


def slot_width(level: int) -> float:
    return float(LEVEL_BASE**level)


def build_index(
    trace_path: str, out_dir: str, events: Iterable[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Index the trace at ``trace_path`` into ``out_dir/timeline.sqlite``; its facts.

    ``events`` stands in for the trace's own (``npulab.profiles.summary.trace.iter_events``),
    for a caller that already streams them. The file appears whole or not at all.
    """
    started = time.monotonic()
    if events is None:
        from npulab.profiles.summary.trace import iter_events

        events = iter_events(trace_path)
    os.makedirs(out_dir, exist_ok=True)
    final = os.path.join(out_dir, INDEX_NAME)
    partial = final + ".partial"
    if os.path.exists(partial):
        os.remove(partial)
    db = sqlite3.connect(partial)
    try:
        db.execute("PRAGMA journal_mode = OFF")
        db.execute("PRAGMA synchronous = OFF")
        db.execute("PRAGMA cache_size = -65536")  # 64 MiB, whatever the trace's size
        db.executescript(SCHEMA)
        builder = _Builder(db)
        builder.load(events)
        facts = builder.finish()
        db.commit()
    except BaseException:
        db.close()
        os.remove(partial)
        raise
    db.close()
    os.replace(partial, final)
    facts.update(
        path=final,
        bytes=os.path.getsize(final),
        seconds=round(time.monotonic() - started, 3),
    )
    return facts


class _Builder:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.lanes: dict[tuple[str, str], int] = {}
        self.lane_events: dict[int, int] = {}
        self.lane_dclass: dict[int, int] = {}
        self.names: dict[str, int] = {}
        self.name_stats: list[list[float]] = []  # [count, total µs] by name id - 1
        self.cats: dict[str, int] = {}
        self.processes: dict[str, dict[str, Any]] = {}
        self.threads: dict[tuple[str, str], dict[str, Any]] = {}
        self.open: dict[int, list[tuple[float, dict[str, Any]]]] = {}
        self.batch: list[tuple] = []
        self.t_min = math.inf
        self.t_max = -math.inf
        self.count = 0
        self.skipped = 0
        self.unclosed = 0

    # -- the pass -------------------------------------------------------------------
    def load(self, events: Iterable[dict[str, Any]]) -> None:
        for raw in events:
            try:
                self.take(raw)
            except (TypeError, ValueError, KeyError, AttributeError):
                # A trace is a user's program's output: one bad event is skipped, not fatal.
                self.skipped += 1
            if len(self.batch) >= BATCH:
                self.flush()
        self.unclosed = sum(len(stack) for stack in self.open.values())
        self.flush()

    def take(self, raw: dict[str, Any]) -> None:
        phase = raw.get("ph")
        if phase == "X":
            self.add(raw, float(raw["ts"]), float(raw.get("dur") or 0.0))
        elif phase in ("i", "I", "R"):
            self.add(raw, float(raw["ts"]), 0.0)
        elif phase == "B":
            lane = self.lane(raw)
            self.open.setdefault(lane, []).append((float(raw["ts"]), raw))
        elif phase == "E":
            stack = self.open.get(self.lane(raw))
            if stack:
                begun, opening = stack.pop()
                merged = dict(opening)
                if raw.get("args"):
                    merged["args"] = {**(opening.get("args") or {}), **raw["args"]}
                self.add(merged, begun, max(0.0, float(raw["ts"]) - begun))
        elif phase == "M":
            self.metadata(raw)

    def lane(self, raw: dict[str, Any]) -> int:
        key = (str(raw.get("pid", "")), str(raw.get("tid", "")))
        found = self.lanes.get(key)
        if found is None:
            found = self.lanes[key] = len(self.lanes) + 1
            self.lane_events[found] = 0
            self.lane_dclass[found] = 0
        return found

    def add(self, raw: dict[str, Any], start: float, dur: float) -> None:
        if not (math.isfinite(start) and math.isfinite(dur)) or dur < 0:
            raise ValueError("a time that is not a number")
        lane = self.lane(raw)
        name = self.name_id(str(raw.get("name", ""))[:MAX_NAME])
        cat = self.cat_id(str(raw.get("cat", ""))[:MAX_NAME])
        klass = dclass(dur)
        args = raw.get("args")
        text = None
        if args:
            text = json.dumps(args, default=str, ensure_ascii=False)
            if len(text) > MAX_ARGS:
                text = json.dumps({"truncated": text[:MAX_ARGS]}, ensure_ascii=False)
        self.batch.append((lane, klass, start, dur, name, cat, text))
        stats = self.name_stats[name - 1]
        stats[0] += 1
        stats[1] += dur
        self.lane_events[lane] += 1
        if klass > self.lane_dclass[lane]:
            self.lane_dclass[lane] = klass
        self.count += 1
        self.t_min = min(self.t_min, start)
        self.t_max = max(self.t_max, start + dur)

    def name_id(self, name: str) -> int:
        found = self.names.get(name)
        if found is None:
            found = self.names[name] = len(self.names) + 1
            self.name_stats.append([0, 0.0])
        return found

    def cat_id(self, name: str) -> int:
        found = self.cats.get(name)
        if found is None:
            found = self.cats[name] = len(self.cats) + 1
        return found

    def metadata(self, raw: dict[str, Any]) -> None:
        args = raw.get("args") or {}
        pid, tid = str(raw.get("pid", "")), str(raw.get("tid", ""))
        what = raw.get("name")
        if what == "process_name":
            self.processes.setdefault(pid, {})["name"] = str(args.get("name", ""))[:MAX_NAME]
        elif what == "process_labels":
            self.processes.setdefault(pid, {})["labels"] = str(args.get("labels", ""))[:MAX_NAME]
        elif what == "process_sort_index":
            self.processes.setdefault(pid, {})["sort"] = _integer(args.get("sort_index"))
        elif what == "thread_name":
            self.threads.setdefault((pid, tid), {})["name"] = str(args.get("name", ""))[:MAX_NAME]
        elif what == "thread_sort_index":
            self.threads.setdefault((pid, tid), {})["sort"] = _integer(args.get("sort_index"))

    def flush(self) -> None:
        if self.batch:
            self.db.executemany(
                "INSERT INTO events (lane, dclass, start, dur, name, cat, args)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                self.batch,
            )
            self.batch = []

    # -- after the pass ---------------------------------------------------------------
    def finish(self) -> dict[str, Any]:
        db = self.db
        lanes = self.lane_rows()
        db.executemany("INSERT INTO lanes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", lanes)
        db.executemany(
            "INSERT INTO names VALUES (?, ?, ?, ?)",
            ((ident, name, *self.name_stats[ident - 1]) for name, ident in self.names.items()),
        )
        db.executemany(
            "INSERT INTO categories VALUES (?, ?)", ((i, n) for n, i in self.cats.items())
        )
        db.executescript(INDEXES)
        t_min = self.t_min if self.count else 0.0
        t_max = self.t_max if self.count else 0.0
        levels = self.aggregate(t_min, t_max, [row[0] for row in lanes])
        facts = {
            "version": FORMAT_VERSION,
            "t_min": t_min,
            "t_max": t_max,
            "events": self.count,
            "lanes": len(lanes),
            "names": len(self.names),
            "levels": levels,
            "skipped": self.skipped,
            "unclosed": self.unclosed,
        }
        db.executemany(
            "INSERT INTO meta VALUES (?, ?)", ((k, json.dumps(v)) for k, v in facts.items())
        )
        return facts

    def lane_rows(self) -> list[tuple]:
        rows = []
        for (pid, tid), ident in self.lanes.items():
            process = self.processes.get(pid, {})
            thread = self.threads.get((pid, tid), {})
            process_name = process.get("name") or (f"process {pid}" if pid else "(no process)")
            name = thread.get("name") or (f"thread {tid}" if tid else process_name)
            words = " ".join((name, process_name, process.get("labels", ""))).lower()
            kind = "stream" if any(word in words for word in DEVICE_WORDS) else "thread"
            # Processes in their sort order (device ones after the host's by default),
            # then threads in theirs: the trace viewers' order.
            process_sort = process.get("sort", _integer(pid) or 0)
            thread_sort = thread.get("sort", _integer(tid) or 0)
            sort_key = (1 if kind == "stream" else 0, process_sort, pid, thread_sort, tid)
            rows.append((sort_key, ident, pid, tid, kind, name, process_name))
        rows.sort(key=lambda row: tuple(_sortable(part) for part in row[0]))
        return [
            (
                ident,
                pid,
                tid,
                kind,
                name,
                process,
                order,
                self.lane_events[ident],
                self.lane_dclass[ident],
            )
            for order, (_, ident, pid, tid, kind, name, process) in enumerate(rows)
        ]

    def aggregate(self, t_min: float, t_max: float, lanes: list[int]) -> list[int]:
        """The busy buckets, level by level: each from the one below (four slots into one)
        and the events that have just become shorter than a slot."""
        span = max(t_max - t_min, 1.0)
        top = 1
        while slot_width(top) < span:
            top += 1
        db = self.db
        for level in range(1, top + 1):
            width = slot_width(level)
            # Events shorter than 4 ** level µs are those of classes below 2 * level.
            newly = (0, 2 * level - 1) if level == 1 else (2 * level - 2, 2 * level - 1)
            for lane in lanes:
                db.execute(
                    "INSERT INTO buckets (lane, level, slot, count, busy)"
                    " SELECT lane, ?, slot, SUM(c), SUM(b) FROM ("
                    "  SELECT lane, slot / ? AS slot, count AS c, busy AS b FROM buckets"
                    "   WHERE lane = ? AND level = ?"
                    "  UNION ALL"
                    "  SELECT lane, CAST((start - ?) / ? AS INTEGER), 1, dur FROM events"
                    "   WHERE lane = ? AND dclass BETWEEN ? AND ?"
                    " ) GROUP BY lane, slot",
                    (level, LEVEL_BASE, lane, level - 1, t_min, width, lane, *newly),
                )
        return list(range(1, top + 1))


def _sortable(value: Any) -> tuple[int, int, str]:
    """Numbers before names, each in its own order (pids may be either)."""
    number = _integer(value)
    return (0, number, "") if number is not None else (1, 0, str(value))


def _integer(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
