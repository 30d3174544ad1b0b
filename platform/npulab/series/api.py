"""The metrics endpoint's reading of one owner's series: its parameters, forms and schema.

The view that owns the URL (a run's ``metrics`` action) checks access and hands the owner
here. A series comes back as rows (the form since the start), as columns, or as CSV; whole
or downsampled; whole reads also a page at a time (``after_step``, ``limit``). A long whole
read without ``limit`` is streamed. Bodies are rendered here, not by DRF, so that numpy
columns go to orjson as they are.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson
from django.http import Http404, HttpResponse, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework.exceptions import ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request

from npulab.core.api import FastJSONRenderer
from npulab.series import encode
from npulab.series.owners import Owner
from npulab.series.reads import (
    MAX_PAGE,
    MAX_POINTS,
    Found,
    buckets,
    find,
    is_downsampled,
    summary,
    whole,
)
from workers.contract.capture import SOURCES, TRACK

JSON, COLUMNS, CSV = "json", "columns", "csv"
_CSV_TYPE = "text/csv; charset=utf-8"
# What a key no series has reads as: no points.
_MISSING = Found(pk=0, points=0, first_step=None, last_step=None)


class ColumnsRenderer(FastJSONRenderer):
    """``?format=columns``: JSON, one array per column."""

    format = COLUMNS


class CSVRenderer(BaseRenderer):
    """``?format=csv`` (or ``Accept: text/csv``): the bodies are rendered by ``respond``."""

    media_type = "text/csv"
    format = CSV
    charset = "utf-8"

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        # Only an error body gets here (``respond`` renders the rest): JSON, as everywhere,
        # and said to be JSON (the header was set from this renderer before it ran).
        response = (renderer_context or {}).get("response")
        if response is not None:
            response["Content-Type"] = "application/json"
        return FastJSONRenderer().render(data)


RENDERERS = [FastJSONRenderer, ColumnsRenderer, CSVRenderer]


class FormatNegotiation(DefaultContentNegotiation):
    """An unknown ``?format=`` is a bad parameter (400 naming it), not a missing page."""

    def select_renderer(
        self, request: Request, renderers: list[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except Http404:
            names = ", ".join(renderer.format for renderer in renderers)
            raise ValidationError({"format": [f"must be one of {names}"]}) from None


PARAMETERS = [
    OpenApiParameter("key", str, description="One metric's points."),
    OpenApiParameter(
        "source",
        str,
        enum=list(SOURCES),
        description=(
            "With `key`: the series of this source (a key two sources give is two series); "
            "without it, `track` first, then `mlflow`, `tensorboard`, `stdout`."
        ),
    ),
    OpenApiParameter(
        "points",
        int,
        description=f"Downsample to at most this many buckets (1-{MAX_POINTS}).",
    ),
    OpenApiParameter(
        "format",
        str,
        enum=[JSON, COLUMNS, CSV],
        description=(
            "With `key`: `json` (the default) [step, value] rows, or [step, mean, min, max] "
            "downsampled; `columns` one array per column (`step`, `value`, `time`; "
            "downsampled `step`, `mean`, `min`, `max`); `csv` the same columns with a "
            "header line (`Accept: text/csv` too). A missing value is `null` (empty in CSV)."
        ),
    ),
    OpenApiParameter(
        "after_step",
        int,
        description="A page of a whole read: the points after this step (`next` gives it).",
    ),
    OpenApiParameter(
        "limit",
        int,
        description=(
            f"A page of a whole read: this many points (1-{MAX_PAGE}), or a few more so that "
            "a step's repeats stay on one page. The JSON forms add `next`, the URL of the "
            'next page or null; CSV a `Link: <…>; rel="next"` header.'
        ),
    ),
]
RESPONSES = {
    (200, "application/json"): OpenApiResponse(
        OpenApiTypes.OBJECT,
        description=(
            "Without `key`: `metrics`, each metric's name, source, point count and last step. "
            "With `key`: `key`, `source`, `total`, `downsampled` and the points (`points`, or "
            "the columns)."
        ),
    ),
    (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="`format=csv`."),
}


def respond(request: Request, owner: Owner) -> HttpResponse | StreamingHttpResponse:
    """Without ``key``: the owner's metrics (JSON). With it: that series in the form the
    request asks for."""
    key = request.query_params.get("key")
    if not key:
        body = orjson.dumps({"metrics": summary(owner)})
        return HttpResponse(body, content_type="application/json")
    form = request.accepted_renderer.format
    try:
        points, after_step, limit = _parameters(request)
        source = request.query_params.get("source")
        if source is not None:
            if source not in SOURCES:
                raise ValidationError({"source": [f"must be one of {', '.join(SOURCES)}"]})
            if owner.run_id is not None:
                owner = replace(owner, source=source)
    except ValidationError:
        # The error body is JSON whatever form was asked for.
        request.accepted_renderer = FastJSONRenderer()
        request.accepted_media_type = FastJSONRenderer.media_type
        raise
    found = find(owner, key)
    head: dict[str, Any] = {"key": key, "total": 0 if found is None else found.points}
    # Said when asked for or not track's: the row form of a tracked series stays as it was.
    shown = found.source if found is not None else source
    if owner.run_id is not None and (source is not None or shown not in (None, TRACK)):
        head["source"] = shown
    paged = after_step is not None or limit is not None
    if found is not None and is_downsampled(found, points):
        head["downsampled"] = True
        page = buckets(found, points or 0)
    else:
        head["downsampled"] = False
        if found is not None and not paged and found.points > encode.STREAM_PAGE:
            return _streamed(form, head, found)
        page = whole(found or _MISSING, after_step, limit, with_time=form != JSON)
    if form == CSV:
        response = HttpResponse(encode.csv(page), content_type=_CSV_TYPE)
        if page.next_step is not None:
            response["Link"] = f'<{_next(request, page.next_step)}>; rel="next"'
        return response
    if paged:
        head["next"] = None if page.next_step is None else _next(request, page.next_step)
    body = encode.columns(head, page) if form == COLUMNS else encode.rows(head, page)
    return HttpResponse(body, content_type="application/json")


def _streamed(form: str, head: dict[str, Any], found: Found) -> StreamingHttpResponse:
    if form == CSV:
        return StreamingHttpResponse(encode.streamed_csv(found), content_type=_CSV_TYPE)
    chunks = (encode.streamed_columns if form == COLUMNS else encode.streamed_rows)(head, found)
    return StreamingHttpResponse(chunks, content_type="application/json")


def _parameters(request: Request) -> tuple[int | None, int | None, int | None]:
    query = request.query_params
    points = _integer(query, "points", 1, MAX_POINTS)
    after_step = _integer(query, "after_step", -(2**63) + 1, 2**63 - 1)
    limit = _integer(query, "limit", 1, MAX_PAGE)
    if points is not None:
        for name in ("after_step", "limit"):
            if name in query:
                raise ValidationError({name: ["pages a whole read: not with points"]})
    return points, after_step, limit


def _integer(query: Any, name: str, low: int, high: int) -> int | None:
    raw = query.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or not low <= value <= high or raw.strip() != raw:
        if name == "after_step":
            raise ValidationError({name: ["must be an integer (a step)"]})
        raise ValidationError({name: [f"must be an integer from {low} to {high}"]})
    return value


def _next(request: Request, step: int) -> str:
    query = request.query_params.copy()
    query["after_step"] = str(step)
    return request.build_absolute_uri(f"{request.path}?{query.urlencode()}")
