"""The timeline's level-of-detail index: built once per trace, read a window at a time.

``build_index`` turns a trace (one streaming pass) into an SQLite file; ``query``
answers "the events of these lanes in [t0, t1] at this resolution" from it, with
the events too short to draw folded into per-pixel busy buckets, so a zoomed-out
view of a 500 MB trace sends thousands of items, not millions. ``search`` finds
events by name and ``event`` gives one event's details.
"""

from npulab.profiles.timeline.build import INDEX_NAME, build_index
from npulab.profiles.timeline.query import (
    BadWindow,
    IndexUnreadable,
    event,
    lanes,
    meta,
    parse_window,
    query,
    search,
)

__all__ = [
    "INDEX_NAME",
    "BadWindow",
    "IndexUnreadable",
    "build_index",
    "event",
    "lanes",
    "meta",
    "parse_window",
    "query",
    "search",
]
