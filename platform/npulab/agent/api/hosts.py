"""The host worker's own endpoints: registration and heartbeats."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from npulab.agent.api.base import AgentAPIView
from npulab.agent.api.serializers import (
    HeartbeatReplySerializer,
    HeartbeatSerializer,
    RegisterReplySerializer,
    RegisterSerializer,
)
from npulab.agent.services import do_record_host_heartbeat, do_register_host_worker
from npulab.runs.gangs import shares_to_stop
from npulab.runs.models import Run


class RegisterView(AgentAPIView):
    @extend_schema(request=RegisterSerializer, responses={200: RegisterReplySerializer})
    def post(self, request: Request) -> Response:
        """A host worker starts: record its devices; reply with the queue to consume."""
        serializer = RegisterSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        host = do_register_host_worker(request.auth, serializer.validated_data)
        return Response({"name": host.name, "queue": host.queue})


class HeartbeatView(AgentAPIView):
    @extend_schema(request=HeartbeatSerializer, responses={200: HeartbeatReplySerializer})
    def post(self, request: Request) -> Response:
        """The host worker is alive; the reply names runs it must stop."""
        serializer = HeartbeatSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        host = request.auth
        do_record_host_heartbeat(host, serializer.validated_data["running"])
        cancel = Run.objects.filter(
            host=host, status=Run.Status.RUNNING, cancel_requested=True
        ).values_list("pk", flat=True)
        # A gang's other hosts stop with it too (cancelled, or one of its hosts failed).
        cancel = sorted({*cancel, *shares_to_stop(host)})
        return Response({"cancel": cancel, "snapshot": host.snapshot_requested})
