"""Events batches in the compact form (workers.contract.blocks, docs/events.md#blocks).

The host worker packs the runs of metric lines of its batch into blocks of columns and
sends the other lines as they are, with ``attempt``, ``start`` and ``end`` in the query as
for the NDJSON form. The batch that comes out holds the lines' events and the blocks
(``npulab.series.blocks.Block``) in the file's order; the events endpoint stores a block's
points without a Python object each, and keeps a bad block as a visible ingest error.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import IO, Any

import orjson
from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser

from npulab.series.blocks import frames
from workers.contract.blocks import BLOCKS
from workers.contract.events import line_event

BLOCKS_FORM = (
    f"With Content-Type {BLOCKS}: the same bytes with the runs of metric lines packed as "
    "columns (docs/events.md#blocks), with attempt, start and end in the query."
)


def batch_of_blocks(body: bytes, params: Mapping[str, str], now: float) -> dict[str, Any]:
    """The batch ``{"attempt", "start", "end", "events"}`` of a compact request."""
    found = frames(body, now)
    limit = settings.NPULAB["MAX_EVENTS_PER_BATCH"]
    if found.events > limit:
        raise ParseError(f"at most {limit} events a batch, this one has {found.events}")
    events: list[Any] = []
    for frame in found.frames:
        if isinstance(frame, bytes):
            events += [line_event(line, orjson.loads, now) for line in frame.split(b"\n")[:-1]]
        else:
            events.append(frame)
    return {
        "attempt": params.get("attempt"),
        "start": params.get("start"),
        "end": params.get("end"),
        "events": events,
    }


class EventBlocksParser(BaseParser):
    """DRF's way in for ``batch_of_blocks``: the query parameters come from the request."""

    media_type = BLOCKS

    def parse(
        self, stream: IO[bytes], media_type: str | None = None, parser_context: Any = None
    ) -> dict[str, Any]:
        request = (parser_context or {})["request"]
        body = request.body if stream else b""
        return batch_of_blocks(body, request.query_params, time.time())
