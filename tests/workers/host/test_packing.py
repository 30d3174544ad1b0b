"""Packing a batch's lines: only EventWriter's metric lines become blocks, and a packed batch
stands for exactly the events its lines do."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

import pytest

from workers.capture.sink import Sink
from workers.contract.blocks import DEFAULT_SOURCE, POINT_BYTES
from workers.events import EventWriter
from workers.host.packing import pack


def unpacked(body: bytes) -> list[tuple[str, Any]]:
    """The frames of ``body``: ("lines", bytes) or ("block", (key, source, points))."""
    frames: list[tuple[str, Any]] = []
    at = 0
    while at < len(body):
        newline = body.index(b"\n", at)
        header = json.loads(body[at:newline])
        payload = body[newline + 1 : newline + 1 + header["size"]]
        at = newline + 1 + header["size"]
        if "key" not in header:
            frames.append(("lines", payload))
            continue
        n = header["points"]
        assert len(payload) == n * POINT_BYTES
        steps, values, times = (
            struct.unpack(f"<{n}{code}", payload[i * 8 * n : (i + 1) * 8 * n])
            for i, code in enumerate("qdd")
        )
        # NaN as None, to compare: NaN is no value, as the platform reads it.
        values = [None if math.isnan(value) else value for value in values]
        points = list(zip(steps, values, times, strict=True))
        frames.append(("block", (header["key"], header.get("source", DEFAULT_SOURCE), points)))
    return frames


def test_a_run_of_metric_lines_is_a_block_per_key_and_other_lines_go_as_they_are(
    tmp_path: Path,
) -> None:
    path = tmp_path / "events.jsonl"
    writer = EventWriter(str(path))
    writer.metrics(1, {"loss": 0.5, "lr": 1e-05})
    writer.metrics(2, {"loss": 0.25, "lr": 3})
    writer.log("stdout", "between")
    writer.metrics(3, {"loss": float("inf")})
    writer.close()
    lines = path.read_bytes().splitlines(keepends=True)
    times = [json.loads(line)["time"] for line in lines]

    body, packed = pack(path.read_bytes())

    assert packed == 5
    assert unpacked(body) == [
        ("block", ("loss", "track", [(1, 0.5, times[0]), (2, 0.25, times[2])])),
        ("block", ("lr", "track", [(1, 1e-05, times[1]), (2, 3.0, times[3])])),
        ("lines", lines[4]),
        ("block", ("loss", "track", [(3, None, times[5])])),
    ]


def test_captured_points_are_packed_with_their_source_and_own_time(tmp_path: Path) -> None:
    # TensorBoard's, MLflow's and printed points go through a capture Sink: the same
    # columns as a tracked metric's, as lines the platform reads each with its source.
    path = tmp_path / "events.jsonl"
    writer = EventWriter(str(path))
    Sink(writer, "tensorboard", 10).write(
        [("loss", 1, 0.5, 1.5), ("loss", 2, float("nan"), 2.5), ("acc", 3, 1, 3.5)]
    )
    writer.close()
    events = [json.loads(line) for line in path.read_bytes().splitlines()]
    assert [e["source"] for e in events] == ["tensorboard"] * 3
    assert (events[1]["value"], events[1]["nonfinite"]) == (None, "nan")

    body, packed = pack(path.read_bytes())

    assert packed == 3
    assert unpacked(body) == [
        ("block", ("loss", "tensorboard", [(1, 0.5, 1.5), (2, None, 2.5)])),
        ("block", ("acc", "tensorboard", [(3, 1.0, 3.5)])),
    ]


def test_lines_that_are_not_exactly_a_writers_metric_go_as_they_are() -> None:
    odd = [
        # An escape in the key, a step too long for 64 bits, another spacing, a field more,
        # a value that is a string, a line that does not start with the event.
        b'{"type": "metric", "time": 1.0, "key": "a\\"b", "step": 1, "value": 1.0}\n',
        b'{"type": "metric", "time": 1.0, "key": "a", "step": 9223372036854775808, "value": 1}\n',
        b'{"type":"metric","time":1.0,"key":"a","step":1,"value":1.0}\n',
        b'{"type": "metric", "time": 1.0, "key": "a", "step": 1, "value": 1.0, "x": 1}\n',
        b'{"type": "metric", "time": 1.0, "key": "a", "step": 1, "value": "1.0"}\n',
        b'xx{"type": "metric", "time": 1.0, "key": "a", "step": 1, "value": 1.0}\n',
        b"\n",
    ]
    body, packed = pack(b"".join(odd))
    assert packed == 0
    assert unpacked(body) == [("lines", b"".join(odd))]


@pytest.mark.parametrize(
    ("step", "value"),
    [(b"01", b"1.0"), (b"1", b"1."), (b"1", b"01"), (b"1", b"1e400"), (b"1", b"--1"), (b"1", b"e")],
)
def test_a_number_json_refuses_leaves_the_batch_to_go_as_lines(step: bytes, value: bytes) -> None:
    good = b'{"type": "metric", "time": 1.0, "key": "a", "step": 1, "value": 1.0}\n'
    bad = b'{"type": "metric", "time": 1.0, "key": "a", "step": %s, "value": %s}\n' % (step, value)
    assert pack(good + bad) == (b"", 0)
    assert pack(good)[1] == 1


def test_a_source_is_kept_and_a_key_that_is_not_utf8_is_read_as_json_would() -> None:
    data = (
        b'{"type": "metric", "time": 2.5, "key": "loss", "step": 7, "value": -1.5e+20, '
        b'"source": "tensorboard"}\n'
        b'{"type": "metric", "time": 2.5, "key": "bad\xff", "step": -3, "value": 0}\n'
        b'{"type": "metric", "time": 2.5, "key": "loss", "step": 8, "value": 2}\n'
    )
    body, packed = pack(data)
    assert packed == 3
    assert unpacked(body) == [
        ("block", ("loss", "tensorboard", [(7, -1.5e20, 2.5)])),
        ("block", ("bad\ufffd", "track", [(-3, 0.0, 2.5)])),
        ("block", ("loss", "track", [(8, 2.0, 2.5)])),
    ]
