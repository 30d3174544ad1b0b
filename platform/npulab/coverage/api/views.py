"""The coverage API: a run's results, its progress, and its comparison with a baseline."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import HttpResponse
from django_filters import rest_framework as filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, renderers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from npulab.core.api import ErrorSerializer, FastJSONRenderer
from npulab.coverage import compare as cell_compare
from npulab.coverage.api.serializers import (
    CoverageCompareSerializer,
    CoverageSummarySerializer,
    OpResultSerializer,
)
from npulab.coverage.junit import junit_xml
from npulab.coverage.matrix import dtype_rates, progress
from npulab.coverage.models import CoveragePlan, OpResult
from npulab.runs.access import run_for, visible_runs
from npulab.runs.api.serializers import RunSerializer
from npulab.runs.models import Run
from workers.kinds.coverage import KIND as COVERAGE_KIND
from workers.kinds.coverage import PASSES, STATUSES


def _coverage_run(user: Any, run_id: int) -> Run:
    run = run_for(user, run_id, Run.objects.select_related("host", "submitted_by", "project"))
    if run.kind != COVERAGE_KIND.name:
        raise NotFound(f"run #{run_id} is a {run.kind} run, not a coverage run")
    return run


class OpResultFilter(filters.FilterSet):
    status = filters.ChoiceFilter(choices=[(s, s) for s in STATUSES])
    op = filters.CharFilter(help_text="The op's name, exactly (add, nn.functional.conv2d).")
    variant = filters.CharFilter()
    dtype = filters.CharFilter(help_text="A torch dtype name: float32, bfloat16 ...")
    family = filters.CharFilter(help_text="The op's namespace: torch, nn.functional, linalg ...")
    pass_ = filters.ChoiceFilter(field_name="phase", choices=[(p, p) for p in PASSES])

    class Meta:
        model = OpResult
        fields: list[str] = []


# ``pass`` is a Python keyword: the query parameter gets its name here.
OpResultFilter.base_filters["pass"] = OpResultFilter.base_filters.pop("pass_")


class OpResultListView(generics.ListAPIView):
    """A coverage run's results, one per op × variant × dtype × pass, in op order."""

    serializer_class = OpResultSerializer
    filterset_class = OpResultFilter
    renderer_classes = [FastJSONRenderer]

    def get_queryset(self) -> QuerySet[OpResult]:
        if getattr(self, "swagger_fake_view", False):  # the schema generator has no run
            return OpResult.objects.none()
        return OpResult.objects.filter(run_id=self.kwargs["run_id"])

    @extend_schema(responses={200: OpResultSerializer(many=True), 404: ErrorSerializer})
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        _coverage_run(request.user, self.kwargs["run_id"])
        return super().get(request, *args, **kwargs)


class CoverageSummaryView(APIView):
    @extend_schema(responses={200: CoverageSummarySerializer, 404: ErrorSerializer})
    def get(self, request: Request, run_id: int) -> Response:
        """Progress (done of total, counts per status, ETA) and the pass rate per dtype."""
        run = _coverage_run(request.user, run_id)
        state = progress(run)
        plan = CoveragePlan.objects.filter(run=run).first()
        rates = dtype_rates(run)
        return Response(
            {
                "run": run.pk,
                "op_set": plan.op_set if plan else run.spec.get("op_set", ""),
                "done": state.done,
                "total": state.total,
                "percent": state.percent,
                "counts": state.counts,
                "elapsed_s": state.elapsed_s,
                "eta_s": state.eta_s,
                "rates": [
                    {"dtype": r.dtype, "passed": r.passed, "tested": r.tested, "rate": r.rate}
                    for r in rates
                ],
                "captured_ops": plan.ops if plan else [],
            }
        )


class JUnitRenderer(renderers.BaseRenderer):
    """``?format=junit``: the comparison as JUnit XML (the view hands it the document)."""

    media_type = "application/xml"
    format = "junit"
    charset = None

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        return data


class CoverageCompareView(APIView):
    renderer_classes = [FastJSONRenderer, JUnitRenderer]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "baseline",
                str,
                description=f"A coverage run id, or `{cell_compare.KNOWN_GOOD}` (the default): "
                "the newest succeeded run like this one on a known-good snapshot.",
            ),
            OpenApiParameter(
                "format",
                str,
                enum=["json", "junit"],
                description="`junit`: JUnit XML, one testcase per op × dtype; "
                "a regression is a failure.",
            ),
        ],
        responses={
            (200, "application/json"): CoverageCompareSerializer,
            (200, "application/xml"): OpenApiResponse(OpenApiTypes.STR, description="JUnit XML"),
            400: ErrorSerializer,
            404: ErrorSerializer,
        },
    )
    def get(self, request: Request, run_id: int) -> Response | HttpResponse:
        """This run's cells against a baseline's: regressions, fixes, new, changed, unchanged,
        missing."""
        run = _coverage_run(request.user, run_id)
        try:
            baseline = cell_compare.resolve_baseline(
                run, request.query_params.get("baseline", ""), visible_runs(request.user)
            )
        except cell_compare.BaselineInvalid as exc:
            raise ValidationError({"baseline": [str(exc)]}) from exc
        except cell_compare.NoBaseline as exc:
            raise NotFound(str(exc)) from exc
        comparison = cell_compare.compare(baseline, run)
        if request.accepted_renderer.format == JUnitRenderer.format:
            response = HttpResponse(junit_xml(comparison), content_type="application/xml")
            name = f"coverage-{run.pk}-vs-{baseline.pk}.xml"
            response["Content-Disposition"] = f'attachment; filename="{name}"'
            return response
        context = {"request": request}
        return Response(
            {
                "baseline": RunSerializer(baseline, context=context).data,
                "candidate": RunSerializer(run, context=context).data,
                "regressions": comparison.regressions,
                "counts": comparison.counts,
                "groups": {
                    group: [_change(change) for change in changes]
                    for group, changes in comparison.groups.items()
                },
            }
        )

    def handle_exception(self, exc: Exception) -> Response:
        # An error is a JSON body whatever format was asked for.
        self.request.accepted_renderer = FastJSONRenderer()
        self.request.accepted_media_type = FastJSONRenderer.media_type
        return super().handle_exception(exc)


def _change(change: cell_compare.CellChange) -> dict[str, Any]:
    def side(result: cell_compare.CellResult | None) -> dict[str, Any] | None:
        return None if result is None else result.__dict__.copy()

    return {
        "op": change.op,
        "variant": change.variant,
        "dtype": change.dtype,
        "pass": change.phase,
        "baseline": side(change.baseline),
        "candidate": side(change.candidate),
    }
