"""Reads of a timeline index: a window at a resolution, one event, a search by name.

A window's answer is bounded by its width, not by the trace: at ``r`` µs a pixel,
level L is the coarsest whose slot (4 ** L µs) is not wider than ``r``; the events at
least one slot long are sent one by one (a lane holds at most a few per pixel and
nesting depth) and the shorter ones as that level's busy buckets, summed into pixels.
Below 4 µs a pixel every event in the window is sent.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable
from typing import Any

from npulab.profiles.timeline.build import FORMAT_VERSION, LEVEL_BASE, slot_width

MAX_WIDTH = 8192
# A window never sends more events than this, whatever the trace (the shortest go first).
MAX_EVENTS = 20_000
MAX_SEARCH = 200
MAX_QUERY = 200


class BadWindow(ValueError):
    """A window query the index cannot answer: the message names the parameter."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class IndexUnreadable(RuntimeError):
    """The file is not a timeline index of this version (damaged, or from another build)."""


def connect(path: str) -> sqlite3.Connection:
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        row = db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
    except sqlite3.DatabaseError as error:
        raise IndexUnreadable(f"not a timeline index: {error}") from error
    if row is None or json.loads(row[0]) != FORMAT_VERSION:
        db.close()
        raise IndexUnreadable("a timeline index of another format version")
    return db


def meta(path: str) -> dict[str, Any]:
    """The trace's span and counts, as the build wrote them."""
    db = connect(path)
    try:
        return {key: json.loads(value) for key, value in db.execute("SELECT key, value FROM meta")}
    finally:
        db.close()


def lanes(path: str) -> list[dict[str, Any]]:
    """Every lane in display order."""
    db = connect(path)
    try:
        return _lanes(db)
    finally:
        db.close()


def _lanes(db: sqlite3.Connection) -> list[dict[str, Any]]:
    rows = db.execute(
        "SELECT id, pid, tid, kind, name, process, events, max_dclass FROM lanes ORDER BY sort"
    )
    return [
        {
            "id": ident,
            "pid": pid,
            "tid": tid,
            "kind": kind,
            "name": name,
            "process": process,
            "events": count,
            "max_dclass": top,
        }
        for ident, pid, tid, kind, name, process, count, top in rows
    ]


def level_for(resolution: float) -> int:
    """The coarsest level whose slot is not wider than ``resolution`` µs; 0: none."""
    if resolution < LEVEL_BASE:
        return 0
    return int(math.log(resolution, LEVEL_BASE) + 1e-9)


def parse_window(
    start: Any, end: Any, width: Any, lane_ids: Any = None
) -> tuple[float, float, int, list[int] | None]:
    """A window's parameters from text (a query string), or ``BadWindow`` naming the bad one."""
    values = {}
    for field, raw in (("start", start), ("end", end)):
        try:
            values[field] = float(raw)
        except (TypeError, ValueError):
            raise BadWindow(field, f"{field} must be a number of microseconds") from None
        if not math.isfinite(values[field]):
            raise BadWindow(field, f"{field} must be a finite number of microseconds")
    if values["end"] <= values["start"]:
        raise BadWindow("end", "end must be after start")
    try:
        pixels = int(width)
    except (TypeError, ValueError):
        raise BadWindow("width", "width must be a whole number of pixels") from None
    if not 1 <= pixels <= MAX_WIDTH:
        raise BadWindow("width", f"width must be between 1 and {MAX_WIDTH} pixels")
    wanted = None
    if lane_ids not in (None, ""):
        try:
            wanted = [int(part) for part in str(lane_ids).split(",") if part.strip()]
        except ValueError:
            raise BadWindow("lanes", "lanes must be lane ids separated by commas") from None
    return values["start"], values["end"], pixels, wanted


def query(
    path: str,
    start: float,
    end: float,
    width: int,
    lane_ids: Iterable[int] | None = None,
    max_events: int = MAX_EVENTS,
) -> dict[str, Any]:
    """The events of ``lane_ids`` (all lanes: None) in [start, end] at ``width`` pixels.

    ``events`` rows are ``[id, lane, start, dur, name index, depth]`` (names in ``names``),
    ``buckets`` rows ``[lane, pixel, count, busy µs]`` for the events too short to draw.
    """
    start, end, width, _ = parse_window(start, end, width)
    resolution = (end - start) / width
    level = level_for(resolution)
    threshold = slot_width(level) if level else 0.0
    db = connect(path)
    try:
        known = {lane["id"]: lane for lane in _lanes(db)}
        chosen = list(known) if lane_ids is None else [i for i in lane_ids if i in known]
        t_min = json.loads(db.execute("SELECT value FROM meta WHERE key = 't_min'").fetchone()[0])
        events, truncated = _events(db, known, chosen, start, end, threshold, max_events)
        buckets = _buckets(db, chosen, level, start, end, resolution, t_min) if level else []
        names = _names(db, {row[4] for row in events})
    finally:
        db.close()
    index = {ident: position for position, ident in enumerate(names)}
    rows = []
    for lane, found in _by_lane(events).items():
        for row, depth in zip(found, _depths(found), strict=True):
            rows.append([row[0], lane, row[2], row[3], index[row[4]], depth])
    return {
        "start": start,
        "end": end,
        "width": width,
        "resolution_us": resolution,
        "level": level,
        "threshold_us": threshold,
        "lanes": chosen,
        "names": list(names.values()),
        "events": rows,
        "buckets": buckets,
        "truncated": truncated,
    }


def _events(
    db: sqlite3.Connection,
    known: dict[int, dict[str, Any]],
    chosen: list[int],
    start: float,
    end: float,
    threshold: float,
    limit: int,
) -> tuple[list[tuple], bool]:
    found: list[tuple] = []
    smallest = 0 if threshold <= 0 else int(math.log2(threshold))
    # Longest classes first: when the window is too full, the shortest events are left out.
    for klass in range(max((known[lane]["max_dclass"] for lane in chosen), default=-1), -1, -1):
        if klass < smallest:
            break
        reach = 2.0 ** (klass + 1)
        for lane in chosen:
            if known[lane]["max_dclass"] < klass:
                continue
            rows = db.execute(
                "SELECT id, lane, start, dur, name FROM events"
                " WHERE lane = ? AND dclass = ? AND start BETWEEN ? AND ?"
                " AND start + dur >= ? AND dur >= ? LIMIT ?",
                (lane, klass, start - reach, end, start, threshold, limit - len(found) + 1),
            ).fetchall()
            found.extend(rows)
            if len(found) > limit:
                return found[:limit], True
    return found, False


def _buckets(
    db: sqlite3.Connection,
    chosen: list[int],
    level: int,
    start: float,
    end: float,
    resolution: float,
    t_min: float,
) -> list[list[float]]:
    width = slot_width(level)
    first, last = math.floor((start - t_min) / width), math.floor((end - t_min) / width)
    pixels: dict[tuple[int, int], list[float]] = {}
    for lane in chosen:
        for slot, count, busy in db.execute(
            "SELECT slot, count, busy FROM buckets WHERE lane = ? AND level = ?"
            " AND slot BETWEEN ? AND ?",
            (lane, level, first, last),
        ):
            pixel = max(0, math.floor((t_min + slot * width - start) / resolution))
            cell = pixels.setdefault((lane, pixel), [0, 0.0])
            cell[0] += count
            cell[1] += busy
    return [[lane, pixel, count, busy] for (lane, pixel), (count, busy) in sorted(pixels.items())]


def _names(db: sqlite3.Connection, ids: set[int]) -> dict[int, str]:
    names: dict[int, str] = {}
    wanted = sorted(ids)
    for offset in range(0, len(wanted), 500):
        chunk = wanted[offset : offset + 500]
        marks = ",".join("?" * len(chunk))
        # Only the "?" placeholders are formatted in; the ids are parameters.
        names.update(db.execute(f"SELECT id, name FROM names WHERE id IN ({marks})", chunk))  # noqa: S608
    return names


def _by_lane(events: list[tuple]) -> dict[int, list[tuple]]:
    lanes: dict[int, list[tuple]] = {}
    for row in events:
        lanes.setdefault(row[1], []).append(row)
    for rows in lanes.values():
        rows.sort(key=lambda row: (row[2], -row[3]))
    return lanes


def _depths(rows: list[tuple]) -> list[int]:
    """Each event's nesting depth in its lane (rows sorted by start, longest first)."""
    ends: list[float] = []
    depths = []
    for _, _, begin, dur, _ in rows:
        while ends and ends[-1] <= begin:
            ends.pop()
        depths.append(len(ends))
        ends.append(begin + dur)
    return depths


def event(path: str, ident: int) -> dict[str, Any] | None:
    """One event's details: name, category, lane, start, duration and args; None if absent."""
    db = connect(path)
    try:
        row = db.execute(
            "SELECT e.id, e.lane, l.name, l.process, e.start, e.dur, n.name, c.name, e.args"
            " FROM events e JOIN lanes l ON l.id = e.lane JOIN names n ON n.id = e.name"
            " JOIN categories c ON c.id = e.cat WHERE e.id = ?",
            (ident,),
        ).fetchone()
    finally:
        db.close()
    if row is None:
        return None
    ident, lane, lane_name, process, start, dur, name, category, args = row
    return {
        "id": ident,
        "lane": lane,
        "lane_name": lane_name,
        "process": process,
        "start": start,
        "dur": dur,
        "name": name,
        "category": category,
        "args": json.loads(args) if args else {},
    }


def search(path: str, text: str, limit: int = MAX_SEARCH) -> dict[str, Any]:
    """Events whose name holds ``text`` (any case): the names with their counts and total
    time, longest total first, and up to ``limit`` occurrences in time order."""
    text = text.strip()
    if not text:
        raise BadWindow("q", "q must name what to search for")
    if len(text) > MAX_QUERY:
        raise BadWindow("q", f"q must be at most {MAX_QUERY} characters")
    pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    db = connect(path)
    try:
        names = db.execute(
            "SELECT id, name, count, total FROM names WHERE name LIKE ? ESCAPE '\\'"
            " AND count > 0 ORDER BY total DESC LIMIT 50",
            (pattern,),
        ).fetchall()
        matches: list[tuple] = []
        for ident, *_ in names:
            matches += db.execute(
                "SELECT e.id, e.lane, e.start, e.dur, e.name FROM events e"
                " WHERE e.name = ? ORDER BY e.start LIMIT ?",
                (ident, limit),
            ).fetchall()
    finally:
        db.close()
    by_id = {ident: name for ident, name, _, _ in names}
    matches.sort(key=lambda row: row[2])
    return {
        "q": text,
        "names": [
            {"name": name, "count": count, "total_us": total} for _, name, count, total in names
        ],
        "matches": [
            {"id": ident, "lane": lane, "start": start, "dur": dur, "name": by_id[name]}
            for ident, lane, start, dur, name in matches[:limit]
        ],
        "truncated": len(matches) > limit or sum(row[2] for row in names) > limit,
    }
