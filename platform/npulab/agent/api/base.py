"""What every agent endpoint shares: host token authentication, body validation."""

from __future__ import annotations

from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from npulab.agent.authentication import AGENT_AUTHENTICATION
from npulab.agent.permissions import IsHostAgent


class AgentAPIView(APIView):
    """Base of the endpoints host workers call with their host token."""

    authentication_classes = AGENT_AUTHENTICATION
    permission_classes = [IsHostAgent]
    # JSON alone: a host worker reads nothing else, and choosing among renderers is a cost
    # every events batch would pay (docs/benchmarks.md).
    renderer_classes = [JSONRenderer]


def valid(serializer_class: type, request: Request, context: dict | None = None) -> dict:
    serializer = serializer_class(data=request.data, context=context or {})
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data
