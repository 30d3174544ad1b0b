from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from npulab.accounts.models import Scope
from npulab.accounts.permissions import HasTokenScope
from npulab.accounts.roles import IsOperator
from npulab.hosts.models import Host
from npulab.snapshots.api.serializers import (
    SNAPSHOT_ID,
    DiffQuerySerializer,
    HostVersionSerializer,
    KnownGoodSerializer,
    SnapshotDetailSerializer,
    SnapshotSerializer,
)
from npulab.snapshots.diff import diff
from npulab.snapshots.models import HostVersion, Snapshot
from npulab.snapshots.recipe import requirements_txt, rollback_recipe
from npulab.snapshots.selectors import history
from npulab.snapshots.services import (
    do_mark_known_good,
    do_request_snapshot,
    do_unmark_known_good,
)


class SnapshotViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Environment snapshots: what was installed on a host, once per distinct content."""

    queryset = Snapshot.objects.select_related("host", "known_good_by")
    serializer_class = SnapshotSerializer
    filterset_fields = {"host__name": ["exact"], "known_good_at": ["isnull"]}
    # The scope a token needs (npulab.accounts.permissions); actions set their own.
    token_scope: str | None = None

    def get_serializer_class(self) -> type[SnapshotSerializer]:
        return SnapshotDetailSerializer if self.action == "retrieve" else SnapshotSerializer

    @extend_schema(request=KnownGoodSerializer, responses={200: SnapshotSerializer})
    # An operator's judgement, not a pipeline's: the operator role, and a token's admin scope.
    @action(
        detail=True,
        methods=["post", "delete"],
        url_path="known-good",
        token_scope=Scope.ADMIN,
        permission_classes=[HasTokenScope, IsOperator],
    )
    def known_good(self, request: Request, pk: str) -> Response:
        """POST marks the snapshot known good (with a note); DELETE takes the mark back."""
        snapshot = self.get_object()
        if request.method == "DELETE":
            do_unmark_known_good(snapshot, by=request.user)
        else:
            serializer = KnownGoodSerializer(data=request.data)
            serializer.is_valid(raise_exception=True)
            do_mark_known_good(snapshot, request.user, serializer.validated_data["note"])
        return Response(SnapshotSerializer(snapshot, context=self.get_serializer_context()).data)

    @extend_schema(responses={200: dict})
    @action(detail=True, methods=["get"])
    def rollback(self, request: Request, pk: str) -> Response:
        """What to reinstall to get this environment back: driver, firmware, CANN, packages."""
        return Response(rollback_recipe(self.get_object()))

    @extend_schema(responses={(200, "text/plain"): str})
    @action(detail=True, methods=["get"])
    def requirements(self, request: Request, pk: str) -> HttpResponse:
        """A pip requirements file pinned to every distribution of the snapshot."""
        snapshot = self.get_object()
        response = HttpResponse(
            requirements_txt(snapshot), content_type="text/plain; charset=utf-8"
        )
        name = f"requirements-{snapshot.host.name}-{snapshot.short_hash}.txt"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response

    @extend_schema(
        parameters=[
            OpenApiParameter("a", SNAPSHOT_ID, required=True, description="From this snapshot id."),
            OpenApiParameter("b", SNAPSHOT_ID, required=True, description="To this snapshot id."),
        ],
        responses={200: dict},
    )
    @action(detail=False, methods=["get"])
    def diff(self, request: Request) -> Response:
        """Every difference between two snapshots, of the same host or of two hosts."""
        query = DiffQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        a, b = query.validated_data["a"], query.validated_data["b"]
        return Response({"a": a.pk, "b": b.pk, **diff(a.data, b.data)})


class HostHistoryView(ListAPIView):
    """A host's environment history, newest first: one entry per change."""

    serializer_class = HostVersionSerializer
    queryset = HostVersion.objects.none()  # for the schema; get_queryset serves requests

    def get_queryset(self) -> Any:
        return history(get_object_or_404(Host, name=self.kwargs["name"]))


class HostSnapshotRequestView(APIView):
    token_scope = Scope.ADMIN  # an operator action (npulab.accounts.permissions)
    permission_classes = [HasTokenScope, IsOperator]

    @extend_schema(request=None, responses={202: dict})
    def post(self, request: Request, name: str) -> Response:
        """Ask the host's worker for a fresh snapshot (sent after its next heartbeat)."""
        do_request_snapshot(get_object_or_404(Host, name=name), by=request.user)
        return Response({"requested": True}, status=status.HTTP_202_ACCEPTED)
