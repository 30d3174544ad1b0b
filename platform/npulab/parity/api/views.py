"""``GET /api/v1/runs/{id}/parity/``: a parity run's first divergent layer and its layers,
paged, or every layer as CSV or in msprobe's xlsx layout (``format``)."""

from __future__ import annotations

import math
from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import renderers, serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from npulab.core.api import ErrorSerializer, FastJSONRenderer
from npulab.core.pagination import CheckedLimitOffsetPagination
from npulab.parity.api.serializers import ParityLayerSerializer, ParitySerializer
from npulab.parity.exports import as_csv, as_xlsx
from npulab.parity.reports import first_divergent, layers, sides
from npulab.runs.access import run_for
from npulab.runs.models import Run
from npulab.series.columns import as_python
from npulab.series.owners import Owner
from npulab.series.reads import WHOLE, read
from workers.kinds.parity import KIND as PARITY_KIND
from workers.kinds.parity import LOSS_RTOL, loss_parity

DEFAULT_RTOL = LOSS_RTOL["float32"]
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


class _Passthrough(renderers.BaseRenderer):
    """The view hands these renderers the document itself."""

    charset = None

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        return data


class CSVRenderer(_Passthrough):
    media_type = "text/csv"
    format = "csv"


class XLSXRenderer(_Passthrough):
    media_type = XLSX
    format = "xlsx"


def _parity_run(user: Any, run_id: int) -> Run:
    run = run_for(user, run_id)
    if run.kind != PARITY_KIND.name:
        raise NotFound(f"run #{run_id} is a {run.kind} run, not a parity run")
    return run


def _first(run: Run) -> dict[str, Any] | None:
    layer = first_divergent(run)
    if layer is None:
        return None
    return {
        "name": layer.name,
        "cosine": layer.cosine,
        "max_abs_err": layer.max_abs_err,
        "max_rel_err": layer.max_rel_err,
        "stack": layer.stack,
        "index": layer.index,
        "broken": layer.broken,
    }


class ParityView(APIView):
    renderer_classes = [FastJSONRenderer, CSVRenderer, XLSXRenderer]

    def handle_exception(self, exc: Exception) -> Response:
        # An error is JSON whatever format was asked for: a CSV of it would be no CSV.
        self.request.accepted_renderer = FastJSONRenderer()
        self.request.accepted_media_type = FastJSONRenderer.media_type
        return super().handle_exception(exc)

    @extend_schema(
        parameters=[
            OpenApiParameter("limit", int, description="Layers a page (default 50)."),
            OpenApiParameter("offset", int, description="Layers skipped."),
            OpenApiParameter(
                "format",
                str,
                enum=["json", "csv", "xlsx"],
                description="csv or xlsx (msprobe's compare layout): every layer, not a page.",
            ),
        ],
        responses={
            200: ParitySerializer,
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.BINARY),
            (200, XLSX): OpenApiResponse(OpenApiTypes.BINARY),
            404: ErrorSerializer,
        },
    )
    def get(self, request: Request, run_id: int) -> Response | HttpResponse:
        """A parity run's first divergent layer (the first, in execution order, that breaks
        a threshold) and its layers in execution order with their cosine, errors and
        thousandth ratios."""
        run = _parity_run(request.user, run_id)
        rows = layers(run)
        chosen = request.accepted_renderer.format
        if chosen in ("csv", "xlsx"):
            body = as_csv(rows.iterator()) if chosen == "csv" else as_xlsx(rows.iterator())
            response = HttpResponse(body, content_type=request.accepted_renderer.media_type)
            response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-parity.{chosen}"'
            return response
        paginator = CheckedLimitOffsetPagination()
        page = paginator.paginate_queryset(rows, request, view=self)
        return Response(
            {
                "run": run.pk,
                "status": run.status,
                "sides": sides(run),
                "summary": run.result.get("summary") or {},
                "first_divergent": _first(run),
                "count": paginator.count,
                "next": paginator.get_next_link(),
                "previous": paginator.get_previous_link(),
                "layers": ParityLayerSerializer(page, many=True).data,
            }
        )


class LossParitySerializer(serializers.Serializer):
    run = serializers.IntegerField(help_text="Side B.")
    against = serializers.IntegerField(help_text="Side A.")
    key = serializers.CharField()
    steps = serializers.IntegerField(help_text="Steps both runs logged.")
    max_rel_diff = serializers.FloatField(
        allow_null=True, help_text="The largest |b - a| / |a| of a step; null: infinite."
    )
    first_step_past_tolerance = serializers.IntegerField(allow_null=True)
    tolerance = serializers.FloatField()
    only_a = serializers.IntegerField()
    only_b = serializers.IntegerField()


def _curve(run: Run, key: str) -> dict[int, float | None]:
    loss = read(Owner.of_run(run.pk), key)
    # A missing value (NaN) is None.
    return dict(zip(loss.columns[WHOLE[0]].tolist(), as_python(loss.values), strict=True))


class LossParityView(APIView):
    renderer_classes = [FastJSONRenderer]

    @extend_schema(
        parameters=[
            OpenApiParameter("against", int, required=True, description="Side A's run."),
            OpenApiParameter("key", str, description="The metric both logged (default loss)."),
            OpenApiParameter(
                "rtol", float, description=f"Tolerance of a step (default {DEFAULT_RTOL})."
            ),
        ],
        responses={200: LossParitySerializer, 400: ErrorSerializer, 404: ErrorSerializer},
    )
    def get(self, request: Request, run_id: int) -> Response:
        """Loss-curve parity of two runs that exist, of any kind, with no new run: this run
        (side B) against `against` (side A), step by step on the metric `key`."""
        run = run_for(request.user, run_id)
        raw = request.query_params.get("against", "")
        if not (raw.isascii() and raw.isdigit()):
            raise ValidationError({"against": ["the id of side A's run"]})
        against = run_for(request.user, int(raw))
        key = request.query_params.get("key", "loss")
        try:
            rtol = float(request.query_params.get("rtol", DEFAULT_RTOL))
        except ValueError:
            rtol = -1.0
        if not (math.isfinite(rtol) and rtol >= 0):
            raise ValidationError({"rtol": ["a number of 0 or more"]})
        found = loss_parity(_curve(against, key), _curve(run, key), rtol)
        return Response({"run": run.pk, "against": against.pk, "key": key, **found})
