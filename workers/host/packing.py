"""Packing a batch of events.jsonl's lines into the compact form (workers.contract.blocks).

Only the metric lines ``EventWriter.metrics`` and ``EventWriter.points`` write are packed,
recognised by their exact text: a run of them becomes one block per series. Its numbers
are read by orjson, the parser the platform reads lines with, so a block holds what the
lines would have given;
a number it refuses (``01``, ``1.``, ``1e400``) leaves the whole batch unpacked, to go as
lines and be judged there. Any other line goes as it is, in a lines frame, for the
platform to read as JSON: it decides what is valid, so packing never has to.
"""

from __future__ import annotations

import math
import re
import sys
from array import array
from itertools import compress
from typing import Any, Hashable, Iterator, Sequence

import orjson

from workers.contract.blocks import DEFAULT_SOURCE, block_frame, lines_frame

# A metric line as EventWriter writes it (groups: time, key, step, value, source), or any
# other line (the last group); every match starts a line, as the one before ended one. The
# numbers' characters only: orjson checks their grammar. A key with an escape is left to
# JSON; a step of 18 digits at most always fits in 64 bits.
_LINE = re.compile(
    rb'(?:\{"type": "metric", "time": ([-+.\deE]+), "key": "([^"\\\x00-\x1f]*)", '
    rb'"step": (-?\d{1,18}), "value": (?:([-+.\deE]+)|null, "nonfinite": "[^"\\\n]*")'
    rb'(?:, "source": "([a-z]+)")?\}\n|([^\n]*\n))'
)
_SWAP = sys.byteorder != "little"
# Up to this many series in a run of metric lines, each series' points are picked out with
# one pass in C (``compress``); more, and the run is sorted out line by line.
_FEW_SERIES = 16


def pack(data: bytes) -> tuple[bytes, int]:
    """The frames of ``data`` (whole lines) and how many points went as blocks; no frames
    and 0 when the batch is better sent as its lines."""
    try:
        return _pack(data)
    except (ValueError, TypeError):
        # A number orjson refuses, or one that is no number of its kind (a float step).
        return b"", 0


def _pack(data: bytes) -> tuple[bytes, int]:
    matches = _LINE.findall(data)
    if not matches:
        return b"", 0
    times, keys, steps, values, sources, lines = zip(*matches)
    frames: list[bytes] = []
    other: list[bytes] = []
    packed = 0
    start = 0
    for index in [i for i, line in enumerate(lines) if line] if any(lines) else ():
        if index > start:
            if other:
                frames.append(lines_frame(b"".join(other)))
                other = []
            run = slice(start, index)
            packed += _blocks(times[run], keys[run], steps[run], values[run], sources[run], frames)
        other.append(lines[index])
        start = index + 1
    if start < len(matches):
        if other:
            frames.append(lines_frame(b"".join(other)))
            other = []
        run = slice(start, None)
        packed += _blocks(times[run], keys[run], steps[run], values[run], sources[run], frames)
    if other:
        frames.append(lines_frame(b"".join(other)))
    return b"".join(frames), packed


def _blocks(
    times: Sequence[bytes],
    keys: Sequence[bytes],
    steps: Sequence[bytes],
    values: Sequence[bytes],
    sources: Sequence[bytes],
    frames: list[bytes],
) -> int:
    """Append a block per series of a run of metric lines to ``frames``; returns the
    points."""
    for (key, source), (step_texts, value_texts, time_texts) in _grouped(
        list(zip(keys, sources)), (steps, values, times)
    ):
        found = _numbers(value_texts)
        if not all(value_texts):
            # A value that was not finite (``null`` with ``nonfinite``) is NaN in a block.
            found = [math.nan if value is None else value for value in found]
        # As the JSON form reads a line that is not UTF-8: with its bad bytes replaced.
        name = key.decode("utf-8", errors="replace")
        source_name = source.decode() or DEFAULT_SOURCE
        _block(name, source_name, _numbers(step_texts), found, _numbers(time_texts), frames)
    return len(steps)


def _grouped(
    series: Sequence[Hashable], columns: tuple[Sequence[Any], ...]
) -> Iterator[tuple[Any, list[Sequence[Any]]]]:
    """Each series' part of ``columns`` (one item a line), in the order each series first
    comes, each part in the lines' order."""
    first = dict.fromkeys(series)
    if len(first) == 1:
        yield next(iter(first)), list(columns)
        return
    if len(first) <= _FEW_SERIES:
        for one in first:
            chosen = list(map(one.__eq__, series))
            yield one, [list(compress(column, chosen)) for column in columns]
        return
    found: dict[Hashable, list[list[Any]]] = {}
    for index, one in enumerate(series):
        parts = found.get(one)
        if parts is None:
            parts = found[one] = [[] for _ in columns]
        for part, column in zip(parts, columns):
            part.append(column[index])
    yield from found.items()


def _block(
    key: str,
    source: str,
    steps: Sequence[int],
    values: Sequence[float],
    times: Sequence[float],
    frames: list[bytes],
) -> None:
    columns = [array("q", steps), array("d", values), array("d", times)]
    if _SWAP:
        for column in columns:
            column.byteswap()
    body = b"".join(column.tobytes() for column in columns)
    frames.append(block_frame(key, source, len(steps), body))


def _numbers(texts: Sequence[bytes]) -> list:
    """The JSON numbers ``texts`` (an empty one is null), read at once."""
    if not all(texts):
        texts = [text or b"null" for text in texts]
    return orjson.loads(b"[" + b",".join(texts) + b"]")
