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
from typing import List, Tuple

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

# A series' points in a run of metric lines: steps, values and times.
_Columns = Tuple[List[bytes], List[bytes], List[bytes]]


def pack(data: bytes) -> tuple[bytes, int]:
    """The frames of ``data`` (whole lines) and how many points went as blocks."""
    frames: list[bytes] = []
    run: dict[tuple[bytes, bytes], _Columns] = {}
    other: list[bytes] = []
    packed = 0
    for time, key, step, value, source, line in _LINE.findall(data):
        if line:
            if run:
                packed += _blocks(run, frames)
                run = {}
            other.append(line)
            continue
        if other:
            frames.append(lines_frame(b"".join(other)))
            other = []
        columns = run.get((key, source))
        if columns is None:
            columns = run[(key, source)] = ([], [], [])
        columns[0].append(step)
        columns[1].append(value or _NAN)
        columns[2].append(time)
    if run:
        packed += _blocks(run, frames)
    if other:
        frames.append(lines_frame(b"".join(other)))
    return b"".join(frames), packed


def _blocks(run: dict[tuple[bytes, bytes], _Columns], frames: list[bytes]) -> int:
    packed = 0
    for (key, source), (steps, values, times) in run.items():
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
        packed += len(steps)
    return packed
