"""What every API view shares: the error format and the agent base view."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from npulab.accounts.authentication import TokenAuthentication
from npulab.accounts.permissions import IsHostAgent
from npulab.runs.models import InvalidTransition
from npulab.runs.services import Conflict, SubmissionInvalid


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, plus the services' own errors: 400 by field, 404, 409 for conflicts."""
    if isinstance(exc, SubmissionInvalid):
        body = {field: [message] for field, message in exc.errors.items()}
        return Response(body, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, Conflict):
        return Response({"detail": exc.detail, **exc.extra}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, InvalidTransition):
        return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, ObjectDoesNotExist):
        return Response({"detail": str(exc)}, status=status.HTTP_404_NOT_FOUND)
    return drf_exception_handler(exc, context)


class AgentAPIView(APIView):
    """Base of the endpoints host workers call with their host token."""

    authentication_classes = [TokenAuthentication]
    permission_classes = [IsHostAgent]
