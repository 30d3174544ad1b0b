"""Packing a batch of events.jsonl's lines into the compact form (workers.contract.blocks).

Only the metric lines ``EventWriter.metrics`` writes are packed, recognised by their exact
text: a run of them becomes one block per series, the columns parsed here in C (``int`` and
``float`` of the matched bytes). Any other line, and a metric line written any other way,
goes as it is, in a lines frame, for the platform to read as JSON: it decides what is
valid, so packing never has to.
"""

from __future__ import annotations

import re
import sys
from array import array
from itertools import compress
from typing import Sequence

from workers.contract.blocks import DEFAULT_SOURCE, block_frame, lines_frame

# JSON's grammar exactly (no leading zero, no bare dot): what JSON refuses is not packed.
_NUMBER = rb"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?"
# A whole line: a metric as EventWriter writes it (groups: time, key, step, value, source),
# or any other line (the last group). A key with an escape is left to JSON; a step of 18
# digits at most always fits in 64 bits.
_LINE = re.compile(
    rb'^(?:\{"type": "metric", "time": (' + _NUMBER + rb'), "key": "([^"\\\x00-\x1f]*)", '
    rb'"step": (-?(?:0|[1-9]\d{0,17})), "value": (?:('
    + _NUMBER
    + rb')|null, "nonfinite": "[^"\\\n]*")'
    rb'(?:, "source": "([a-z]+)")?\}\n|([^\n]*\n))',
    re.MULTILINE,
)
_NAN = b"nan"
_SWAP = sys.byteorder != "little"
# Up to this many series in a run of metric lines, each series' points are picked out with
# one pass in C (``compress``); more, and the run is sorted out line by line.
_FEW_SERIES = 16


def pack(data: bytes) -> tuple[bytes, int]:
    """The frames of ``data`` (whole lines) and how many points went as blocks."""
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
    """Append a block per series of a run of metric lines to ``frames``, in the order each
    series first comes; returns the points."""
    if not all(values):
        # A value that was not finite (``null`` with ``nonfinite``) is NaN in a block.
        values = [value or _NAN for value in values]
    series = list(zip(keys, sources))
    first = dict.fromkeys(series)
    if len(first) == 1:
        ((key, source),) = first
        _block(key, source, steps, values, times, frames)
        return len(steps)
    if len(first) <= _FEW_SERIES:
        for one in first:
            chosen = list(map(one.__eq__, series))
            columns = [list(compress(column, chosen)) for column in (steps, values, times)]
            _block(one[0], one[1], *columns, frames)
        return len(steps)
    found: dict[tuple[bytes, bytes], tuple[list[bytes], list[bytes], list[bytes]]] = {}
    for one, step, value, time in zip(series, steps, values, times):
        columns = found.get(one)
        if columns is None:
            columns = found[one] = ([], [], [])
        columns[0].append(step)
        columns[1].append(value)
        columns[2].append(time)
    for (key, source), (step_list, value_list, time_list) in found.items():
        _block(key, source, step_list, value_list, time_list, frames)
    return len(steps)


def _block(
    key: bytes,
    source: bytes,
    steps: Sequence[bytes],
    values: Sequence[bytes],
    times: Sequence[bytes],
    frames: list[bytes],
) -> None:
    columns = [
        array("q", map(int, steps)),
        array("d", map(float, values)),
        array("d", map(float, times)),
    ]
    if _SWAP:
        for column in columns:
            column.byteswap()
    body = b"".join(column.tobytes() for column in columns)
    # As the JSON form reads a line that is not UTF-8: with its bad bytes replaced.
    name = key.decode("utf-8", errors="replace")
    frames.append(block_frame(name, source.decode() or DEFAULT_SOURCE, len(steps), body))
