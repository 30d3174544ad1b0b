"""The host worker's run endpoints: claim, stream events, report the end.

Host token only; a host may touch only the runs placed on it.
"""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from npulab.core.api import AgentAPIView
from npulab.runs.api.serializers import (
    AttemptSerializer,
    ClaimReplySerializer,
    EventAckSerializer,
    EventBatchSerializer,
    FinishSerializer,
)
from npulab.runs.services import do_claim_run, do_finish_run, do_ingest_events


class ClaimView(AgentAPIView):
    @extend_schema(request=AttemptSerializer, responses={200: ClaimReplySerializer})
    def post(self, request: Request, run_id: int) -> Response:
        """Take a dispatched run: 409 if it was cancelled, requeued or is another attempt."""
        data = _valid(AttemptSerializer, request)
        run = do_claim_run(request.auth, run_id, data["attempt"])
        return Response(
            {
                "run": run.pk,
                "attempt": run.attempt,
                "spec": run.spec,
                "devices": run.device_indices,
            }
        )


class EventsView(AgentAPIView):
    @extend_schema(request=EventBatchSerializer, responses={200: EventAckSerializer})
    def post(self, request: Request, run_id: int) -> Response:
        """Store a batch of events.jsonl; 409 with `expected_start` if it does not follow on."""
        data = _valid(
            EventBatchSerializer,
            request,
            context={"max_events": settings.NPULAB["MAX_EVENTS_PER_BATCH"]},
        )
        reply = do_ingest_events(
            request.auth, run_id, data["attempt"], data["start"], data["end"], data["events"]
        )
        return Response(reply)


class FinishView(AgentAPIView):
    @extend_schema(request=FinishSerializer, responses={200: dict})
    def post(self, request: Request, run_id: int) -> Response:
        """The runner exited and every event was sent: the platform decides the outcome."""
        data = _valid(FinishSerializer, request)
        run = do_finish_run(request.auth, run_id, data["attempt"], data)
        return Response({"status": run.status, "exit_cause": run.exit_cause})


def _valid(serializer_class: type, request: Request, context: dict | None = None) -> dict:
    serializer = serializer_class(data=request.data, context=context or {})
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data
