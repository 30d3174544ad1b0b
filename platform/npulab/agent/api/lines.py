"""Events batches sent as the lines of events.jsonl themselves (docs/events.md#forwarding).

The host worker posts the file's bytes from ``start`` to ``end`` as they are
(``workers.contract.events.NDJSON``), with ``attempt``, ``start`` and ``end``
as query parameters: it parses and encodes nothing, and each line is parsed
once, here. The batch that comes out is the JSON form's, so the events
endpoint validates and stores both alike.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import IO, Any

import orjson
from django.conf import settings
from drf_spectacular.utils import OpenApiParameter
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser

from workers.contract.blocks import BLOCKS
from workers.contract.events import NDJSON, line_event

LINES_FORM = (
    f"With Content-Type {NDJSON}: the bytes of events.jsonl from start to end, as written "
    "(one event a line), with attempt, start and end in the query."
)
LINES_PARAMETERS = [
    OpenApiParameter(name, int, description=f"{what} ({NDJSON} and {BLOCKS} bodies only)")
    for name, what in (
        ("attempt", "The attempt the events belong to"),
        ("start", "Byte offset of the body's first line"),
        ("end", "Byte offset just past its last line"),
    )
]


def batch_of_lines(body: bytes, params: Mapping[str, str], now: float) -> dict[str, Any]:
    """The batch ``{"attempt", "start", "end", "events"}`` of an NDJSON request.

    The body must be whole lines and exactly ``end - start`` bytes: what the
    offsets say is what arrived. A line that is not an event becomes a
    ``runner`` log line (``line_event``); the batch is never refused for one.
    """
    if body and not body.endswith(b"\n"):
        raise ParseError("an events body is whole lines: the last one has no newline")
    lines = body.split(b"\n")[:-1]
    limit = settings.NPULAB["MAX_EVENTS_PER_BATCH"]
    if len(lines) > limit:
        raise ParseError(f"at most {limit} events a batch, this one has {len(lines)}")
    start, end = params.get("start"), params.get("end")
    if start and end and start.isdigit() and end.isdigit() and int(end) - int(start) != len(body):
        raise ParseError(f"the body holds {len(body)} bytes, from start to end are {end}-{start}")
    return {
        "attempt": params.get("attempt"),
        "start": start,
        "end": end,
        "events": [line_event(line, orjson.loads, now) for line in lines],
    }


class EventLinesParser(BaseParser):
    """DRF's way in for ``batch_of_lines``: the query parameters come from the request."""

    media_type = NDJSON

    def parse(
        self, stream: IO[bytes], media_type: str | None = None, parser_context: Any = None
    ) -> dict[str, Any]:
        request = (parser_context or {})["request"]
        # request.body, not the stream: Django holds it to DATA_UPLOAD_MAX_MEMORY_SIZE (413),
        # as DRF does for the JSON form.
        body = request.body if stream else b""
        return batch_of_lines(body, request.query_params, time.time())
