"""The compact form of an events batch: metric points as columns (docs/events.md#blocks).

A training loop's events.jsonl is almost all metric lines. Sent as lines, each costs the
platform a JSON decode and a Python object or three; as columns, a run of them costs a
``numpy.frombuffer``. The body of a request with Content-Type ``BLOCKS`` is a sequence of
frames, in the order of the file, each a header (one JSON object on a line of its own) and
then exactly ``size`` bytes:

- ``{"size": S}``: S bytes of events.jsonl's own lines, as the NDJSON form sends them;
- ``{"size": S, "key": K, "source": SRC, "points": N}``: N points of the series K (``source``
  says where they came from, ``track`` when absent), as three little-endian columns one after
  the other: the steps (int64), the values (float64; NaN or an infinity where the value was
  one) and the times (float64, Unix seconds). S is 24 N.

``attempt``, ``start`` and ``end`` travel in the query as for the NDJSON form, and the offsets
mean what they mean there: the frames stand for the file's bytes from ``start`` to ``end``.
Standard library only: the host worker packs, the platform unpacks.
"""

from __future__ import annotations

import json
from typing import Any

from workers.contract.capture import TRACK

BLOCKS = "application/x-npulab-blocks"

# The header fields.
SIZE, KEY, SOURCE, POINTS = "size", "key", "source", "points"
# The source of points whose block names none (workers.track's).
DEFAULT_SOURCE = TRACK
# Bytes a point takes in a block: a step, a value and a time.
POINT_BYTES = 24
# A header line longer than this is not one (a key is at most a few hundred characters).
MAX_HEADER_BYTES = 64 * 1024

_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def lines_frame(lines: bytes) -> bytes:
    """A frame of whole lines of events.jsonl, sent as they are."""
    return _header({SIZE: len(lines)}) + lines


def block_frame(key: str, source: str, points: int, columns: bytes) -> bytes:
    """A frame of ``points`` points of one series: ``columns`` is steps, values, times."""
    header: dict[str, Any] = {SIZE: len(columns), KEY: key, POINTS: points}
    if source != DEFAULT_SOURCE:
        header[SOURCE] = source
    return _header(header) + columns


def _header(fields: dict[str, Any]) -> bytes:
    return (_ENCODER.encode(fields) + "\n").encode("utf-8")
