from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404, HttpResponseBase
from django_filters import rest_framework as filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from npulab.core.api import ErrorSerializer, FastJSONParser
from npulab.runs.access import change_refused, visible_runs
from npulab.runs.api.schema import submission_schema
from npulab.runs.api.serializers import (
    RunDetailSerializer,
    RunEventSerializer,
    RunSerializer,
)
from npulab.runs.bundle import bundle_response
from npulab.runs.models import Run, RunEvent
from npulab.runs.services import do_cancel_run, do_restart_run, do_submit_run
from npulab.series import api as metrics_api
from npulab.series.owners import Owner
from workers.contract.diagnosis import CATEGORIES

IDEMPOTENCY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
MAX_IDEMPOTENCY_KEY = 200


class RunFilterSet(filters.FilterSet):
    host = filters.CharFilter(field_name="host__name")
    submitted_by = filters.CharFilter(field_name="submitted_by__username")
    project = filters.CharFilter(field_name="project__slug", help_text="A project's slug.")
    category = filters.ChoiceFilter(
        field_name="diagnosis_category",
        choices=[(name, name) for name in CATEGORIES],
        help_text="The diagnosis category of a failed run (docs/diagnosis.md).",
    )

    class Meta:
        model = Run
        fields = ["status", "kind", "device_type", "host", "submitted_by", "project", "category"]


class RunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Runs: submit one, follow it, cancel it."""

    queryset = Run.objects.select_related("host", "submitted_by", "project")
    serializer_class = RunSerializer
    filterset_class = RunFilterSet
    # A spec is JSON: a form post could not express its types.
    parser_classes = [FastJSONParser]

    def get_queryset(self) -> QuerySet[Run]:
        # The runs of the caller's projects only: any other id is a 404 (npulab.runs.access).
        return visible_runs(self.request.user, super().get_queryset())

    def get_serializer_class(self) -> type[RunSerializer]:
        return RunDetailSerializer if self.action == "retrieve" else RunSerializer

    @extend_schema(
        request={"application/json": submission_schema()},
        parameters=[
            OpenApiParameter(
                IDEMPOTENCY_HEADER,
                {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_IDEMPOTENCY_KEY,
                    "pattern": "^[ -~]+$",
                },
                OpenApiParameter.HEADER,
                description=(
                    "1-200 printable ASCII characters, unique per submission (e.g. the CI "
                    "job's id). A retry with the same key and body gets the run queued "
                    "the first time (200, `Idempotent-Replayed: true`) instead of a "
                    "second run; the same key with another body is a 409 "
                    "`idempotency_conflict`."
                ),
            )
        ],
        responses={
            201: RunDetailSerializer,
            200: OpenApiResponse(
                RunDetailSerializer,
                description="A replay: the run an earlier request with this key queued.",
            ),
            400: ErrorSerializer,
            409: ErrorSerializer,
        },
        description=(
            "Queue a run. The body is the run's spec (as `python -m workers.run` takes it) "
            "plus optional `host`, `labels`, `name`, `tags`, `priority` and `wait_for_host`. "
            "A bad field is answered with 400 and the field's name."
        ),
    )
    def create(self, request: Request) -> Response:
        key = request.headers.get(IDEMPOTENCY_HEADER)
        if key is not None and not (
            1 <= len(key) <= MAX_IDEMPOTENCY_KEY and all(" " <= c <= "~" for c in key)
        ):
            raise ValidationError(
                {
                    IDEMPOTENCY_HEADER: [
                        f"must be 1 to {MAX_IDEMPOTENCY_KEY} printable ASCII characters"
                    ]
                }
            )
        if not isinstance(request.data, dict):
            raise ValidationError({"spec": ["must be a JSON object"]})
        run = do_submit_run(request.user, dict(request.data), idempotency_key=key or "")
        body = RunDetailSerializer(run, context=self.get_serializer_context()).data
        if run.replayed:
            return Response(body, headers={REPLAYED_HEADER: "true"})
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: RunDetailSerializer, 409: ErrorSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        """Cancel a run: at once if not started, else its process group is killed."""
        run = self.get_object()
        refused = change_refused(request.user, run, "cancel it")
        if refused:
            raise PermissionDenied(refused)
        run = do_cancel_run(run.pk, request.user)
        return Response(RunDetailSerializer(run, context=self.get_serializer_context()).data)

    @extend_schema(request=None, responses={200: RunDetailSerializer, 409: ErrorSerializer})
    @action(detail=True, methods=["post"])
    def restart(self, request: Request, pk: str) -> Response:
        """Start a failed, cancelled or lost run again as a new attempt (from its checkpoint)."""
        run = self.get_object()
        refused = change_refused(request.user, run, "restart it")
        if refused:
            raise PermissionDenied(refused)
        run = do_restart_run(run.pk, request.user)
        return Response(RunDetailSerializer(run, context=self.get_serializer_context()).data)

    @extend_schema(
        responses={(200, "application/gzip"): OpenApiTypes.BINARY},
        description="The run's support bundle (docs/diagnosis.md): spec, snapshot, diagnosis, "
        "logs, what the host collected (plogs, kernel messages, npu-smi health), the host's "
        "health and telemetry around the failure, secrets redacted; a gzipped tar.",
    )
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def bundle(self, request: Request, pk: str) -> HttpResponseBase:
        return bundle_response(self.get_object())

    @extend_schema(
        parameters=[
            OpenApiParameter("type", str, description="Only events of this type, e.g. log."),
            OpenApiParameter("after", int, description="Only events with a larger id."),
        ],
        responses={200: RunEventSerializer(many=True)},
    )
    # Paged, but not filtered like the run list: ?status= would hide the run itself.
    @action(detail=True, methods=["get"], filter_backends=[])
    def events(self, request: Request, pk: str) -> Response:
        """The run's events in order (logs, steps ...), paginated; metrics are separate."""
        run = self.get_object()
        events = RunEvent.objects.filter(run=run)
        if request.query_params.get("type"):
            events = events.filter(type=request.query_params["type"])
        after = request.query_params.get("after")
        if after:
            if not after.isdigit():
                raise ValidationError({"after": ["must be an event id"]})
            events = events.filter(pk__gt=int(after))
        page = self.paginate_queryset(events.order_by("id"))
        return self.get_paginated_response(RunEventSerializer(page, many=True).data)

    @extend_schema(parameters=metrics_api.PARAMETERS, responses=metrics_api.RESPONSES)
    @action(
        detail=True,
        methods=["get"],
        renderer_classes=metrics_api.RENDERERS,
        content_negotiation_class=metrics_api.FormatNegotiation,
    )
    def metrics(self, request: Request, pk: str) -> HttpResponseBase:
        """Without `key`: each metric's name, point count and last step.
        With `key`: that metric's [step, value] points in step order; with `points` as well
        and more points than that, [first step, mean, min, max] per bucket of steps. Also as
        columns or CSV (`format`), and a page at a time (`after_step`, `limit`)."""
        # Only the run's id: a chart asks often, and the whole row (spec, joins) costs more
        # than the read itself. The same visibility as get_object (npulab.runs.access).
        run_id = self.get_queryset().filter(pk=pk).values_list("pk", flat=True).first()
        if run_id is None:
            raise Http404(f"No run #{pk}.")
        return metrics_api.respond(request, Owner.of_run(run_id))
