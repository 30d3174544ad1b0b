"""The compact form's frames read back (workers.contract.blocks): lines, and blocks of points.

A block's three columns become ``Points`` with one ``numpy.frombuffer`` each: a thousand
points cost what one JSON event did. What is wrong with a block (its columns cut short or too
long, a step out of range) is said in ``Block.problem``; what the key and source may be is
the events' business (npulab.runs.events), as for the JSON form.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import orjson

from npulab.series.chunks import Points
from npulab.series.rollups import LOWEST_STEP
from workers.contract.blocks import (
    DEFAULT_SOURCE,
    KEY,
    MAX_HEADER_BYTES,
    POINT_BYTES,
    POINTS,
    SIZE,
    SOURCE,
)

_STEP = np.dtype("<i8")
_FLOAT = np.dtype("<f8")


class Block(NamedTuple):
    """One block of a batch: its header as sent, and its points or what is wrong with it."""

    header: dict[str, Any]
    points: Points | None
    problem: str | None

    @property
    def key(self) -> Any:
        return self.header.get(KEY)

    @property
    def source(self) -> Any:
        return self.header.get(SOURCE, DEFAULT_SOURCE)


class Frames(NamedTuple):
    """A body's frames in order: each an NDJSON ``bytes`` of whole lines or a ``Block``."""

    frames: list[bytes | Block]
    # Events the body holds: its lines and its blocks' points.
    events: int


def frames(body: bytes, now: float) -> Frames:
    """The frames of a compact body. A frame that cannot be read (a header that is not one,
    a size past the end of the body) ends it: it and what follows are one ``Block`` with the
    problem, and every frame before it stands."""
    found: list[bytes | Block] = []
    events = 0
    at = 0
    while at < len(body):
        newline = body.find(b"\n", at, at + MAX_HEADER_BYTES)
        header: dict[str, Any] = {}
        if newline < 0:
            problem = f"a frame header is a line of at most {MAX_HEADER_BYTES} bytes"
        else:
            header, problem = _header(body[at:newline])
        size = header.get(SIZE, 0)
        if problem is None and len(body) - newline - 1 < size:
            problem = f"the frame is cut short: {size} bytes said, {len(body) - newline - 1} sent"
        if problem is not None:
            cut = {"at": at, "frame": body[at : at + 200].decode("utf-8", "replace")}
            found.append(Block(header or cut, None, f"unreadable frame: {problem}"))
            events += 1
            break
        payload = body[newline + 1 : newline + 1 + size]
        at = newline + 1 + size
        if KEY in header or POINTS in header:
            block = block_of(header, payload, now)
            events += len(block.points) if block.points is not None else 1
            found.append(block)
        else:
            if payload and not payload.endswith(b"\n"):
                found.append(Block(header, None, "a lines frame must end with a newline"))
                events += 1
                continue
            events += payload.count(b"\n")
            found.append(payload)
    return Frames(found, events)


def _header(text: bytes) -> tuple[dict[str, Any], str | None]:
    try:
        header = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}, "a frame header is one JSON object on a line"
    if not isinstance(header, dict):
        return {}, "a frame header is one JSON object on a line"
    size = header.get(SIZE)
    if type(size) is not int or size < 0:
        return header, "a frame header needs size, a byte count"
    return header, None


def block_of(header: dict[str, Any], payload: bytes, now: float) -> Block:
    """The block of ``header`` with its ``payload`` (its columns), or what is wrong with it;
    a time that is not finite becomes ``now``, as in the JSON form."""
    count = header.get(POINTS)
    if type(count) is not int or count < 1:
        return Block(header, None, "a block needs points, a positive count")
    if len(payload) != count * POINT_BYTES:
        return Block(
            header,
            None,
            f"a block of {count} points holds {count * POINT_BYTES} bytes, this one {len(payload)}",
        )
    steps = np.frombuffer(payload, _STEP, count, 0)
    if int(steps.min()) < LOWEST_STEP:
        return Block(header, None, f"a block's steps must be at least {LOWEST_STEP}")
    values = np.frombuffer(payload, _FLOAT, count, 8 * count)
    times = np.frombuffer(payload, _FLOAT, count, 16 * count)
    # NaN and the infinities are stored as NaN, as the JSON form's null is.
    values = np.where(np.isfinite(values), values, np.nan)
    times = np.where(np.isfinite(times), times, now)
    return Block(header, Points(steps.astype(np.int64), values, times), None)
