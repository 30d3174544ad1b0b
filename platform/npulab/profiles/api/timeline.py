"""The timeline's window as a public API: what the timeline page draws, for a script."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from npulab.core import errors
from npulab.core.api import ErrorSerializer
from npulab.profiles import timeline
from npulab.profiles.access import visible_profiles
from npulab.profiles.timeline.query import MAX_WIDTH
from npulab.profiles.timeline.store import IndexMissing, local_index


class NoIndex(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = errors.CONFLICT


class ProfileTimelineView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "start", OpenApiTypes.DOUBLE, required=True, description="µs, as in the trace"
            ),
            OpenApiParameter(
                "end", OpenApiTypes.DOUBLE, required=True, description="µs, after start"
            ),
            OpenApiParameter(
                "width", OpenApiTypes.INT, required=True, description=f"pixels, 1 to {MAX_WIDTH}"
            ),
            OpenApiParameter(
                "lanes", OpenApiTypes.STR, description="lane ids, comma-separated; all by default"
            ),
        ],
        responses={
            (200, "application/json"): OpenApiTypes.OBJECT,
            400: OpenApiResponse(ErrorSerializer, description="A parameter is missing or wrong."),
            409: OpenApiResponse(ErrorSerializer, description="The profile has no index yet."),
        },
    )
    def get(self, request: Request, pk: int) -> Response:
        """The events of the window ``start``..``end`` at ``width`` pixels (docs/profiles.md,
        "Timeline and compare"): ``events`` rows ``[id, lane, start, dur, name index, depth]``
        with their ``names``, and ``buckets`` rows ``[lane, pixel, count, busy µs]`` for the
        events shorter than a pixel."""
        profile = get_object_or_404(visible_profiles(request.user), pk=pk)
        params = request.query_params
        try:
            start, end, width, lanes = timeline.parse_window(
                params.get("start"), params.get("end"), params.get("width"), params.get("lanes")
            )
        except timeline.BadWindow as bad:
            raise ValidationError({bad.field: [str(bad)]}) from bad
        try:
            path = local_index(profile)
            timeline.meta(path)  # an index of another format version is refused here
        except IndexMissing as missing:
            raise NoIndex(str(missing)) from missing
        except timeline.IndexUnreadable as unreadable:
            raise NoIndex(f"{unreadable}: summarise the profile again") from unreadable
        return Response(timeline.query(path, start, end, width, lanes))
