from __future__ import annotations

from django.db.models import Count
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from npulab.core.api import AgentAPIView
from npulab.hosts.api.serializers import (
    HeartbeatReplySerializer,
    HeartbeatSerializer,
    HostSerializer,
    RegisterReplySerializer,
    RegisterSerializer,
)
from npulab.hosts.models import Host
from npulab.hosts.services import do_record_heartbeat, do_register_host
from npulab.runs.models import Run
from npulab.runs.services import do_reconcile_host_runs


class HostViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Accelerator hosts and their devices."""

    queryset = Host.objects.annotate(busy_devices=Count("leases"))
    serializer_class = HostSerializer
    lookup_field = "name"
    filterset_fields = ["device_type", "status", "enabled"]


class RegisterView(AgentAPIView):
    @extend_schema(request=RegisterSerializer, responses={200: RegisterReplySerializer})
    def post(self, request: Request) -> Response:
        """A host worker starts: record its devices; reply with the queue to consume."""
        serializer = RegisterSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        host = do_register_host(request.auth, serializer.validated_data)
        return Response({"name": host.name, "queue": host.queue})


class HeartbeatView(AgentAPIView):
    @extend_schema(request=HeartbeatSerializer, responses={200: HeartbeatReplySerializer})
    def post(self, request: Request) -> Response:
        """The host worker is alive; the reply names runs it must stop."""
        serializer = HeartbeatSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        host = request.auth
        do_record_heartbeat(host)
        do_reconcile_host_runs(host, serializer.validated_data["running"])
        cancel = Run.objects.filter(
            host=host, status=Run.Status.RUNNING, cancel_requested=True
        ).values_list("pk", flat=True)
        return Response({"cancel": list(cancel), "snapshot": host.snapshot_requested})
