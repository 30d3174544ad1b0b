from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from npulab.accounts.models import Scope
from npulab.accounts.permissions import HasTokenScope
from npulab.accounts.roles import IsOperator
from npulab.audit.models import AuditEntry
from npulab.core.api import ErrorSerializer
from npulab.health.api.serializers import (
    AuditEntrySerializer,
    ClearDeviceSerializer,
    DeviceHealthSerializer,
    DrainSerializer,
    HostHealthSerializer,
    UndrainSerializer,
)
from npulab.health.models import DeviceHealth, HostHealth
from npulab.health.selectors import health_of
from npulab.health.services import do_clear_device, do_drain_host, do_undrain_host
from npulab.hosts.models import Host


class HostHealthView(APIView):
    """A host's health: its state, the reasons, its devices' states."""

    @extend_schema(responses={200: HostHealthSerializer}, tags=["hosts"])
    def get(self, request: Request, name: str) -> Response:
        host = get_object_or_404(Host.objects.select_related("health"), name=name)
        # A host no rule has looked at yet is healthy, with no reasons.
        health = health_of(host) or HostHealth(host=host)
        return Response(HostHealthSerializer(health).data)


class _OperatorAction(APIView):
    permission_classes = [HasTokenScope, IsOperator]
    token_scope = Scope.ADMIN  # an operator action (npulab.accounts.permissions)


class HostDrainView(_OperatorAction):
    @extend_schema(
        request=DrainSerializer,
        responses={200: HostHealthSerializer, 409: ErrorSerializer},
        tags=["hosts"],
    )
    def post(self, request: Request, name: str) -> Response:
        """Drain the host: no new run is placed on it; what runs there finishes. Operators only."""
        host = get_object_or_404(Host, name=name)
        serializer = DrainSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        health = do_drain_host(host, request.user, serializer.validated_data["note"])
        return Response(HostHealthSerializer(health).data)


class HostUndrainView(_OperatorAction):
    @extend_schema(
        request=UndrainSerializer,
        responses={200: HostHealthSerializer, 409: ErrorSerializer},
        tags=["hosts"],
    )
    def post(self, request: Request, name: str) -> Response:
        """Undrain the host: its health rules decide again whether runs go there. Operators only."""
        host = get_object_or_404(Host, name=name)
        serializer = UndrainSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        health = do_undrain_host(host, request.user, serializer.validated_data["note"])
        return Response(HostHealthSerializer(health).data)


class HostDeviceClearView(_OperatorAction):
    @extend_schema(
        request=ClearDeviceSerializer,
        responses={200: DeviceHealthSerializer, 409: ErrorSerializer},
        tags=["hosts"],
    )
    def post(self, request: Request, name: str, index: int) -> Response:
        """Put a bad device back in service; its error counts start afresh. Operators only."""
        host = get_object_or_404(Host, name=name)
        get_object_or_404(DeviceHealth, host=host, index=index)
        serializer = ClearDeviceSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        device = do_clear_device(host, index, request.user, serializer.validated_data["note"])
        return Response(DeviceHealthSerializer(device).data)


class AuditEntryListView(ListAPIView):
    """The audit log, newest first: who drained, undrained or cleared what. Operators only."""

    permission_classes = [HasTokenScope, IsOperator]
    serializer_class = AuditEntrySerializer
    queryset = AuditEntry.objects.all()
    filterset_fields = ["action", "target_type", "target_id", "actor_kind"]
