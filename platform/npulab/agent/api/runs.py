"""The host worker's run endpoints: claim, stream events, report the end.

Host token only; a host may touch only the runs placed on it.
"""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from npulab.agent.api.base import AgentAPIView, valid
from npulab.agent.api.blocks import BLOCKS_FORM, EventBlocksParser
from npulab.agent.api.lines import LINES_FORM, LINES_PARAMETERS, EventLinesParser
from npulab.agent.api.serializers import (
    AttemptSerializer,
    ClaimReplySerializer,
    EventAckSerializer,
    EventBatchSerializer,
    FinishSerializer,
)
from npulab.core.api import ErrorSerializer, FastJSONParser
from npulab.runs import capabilities
from npulab.runs.gangs import gang_of, share_spec
from npulab.runs.services import do_claim_run, do_finish_run, do_ingest_events
from workers.contract.blocks import BLOCKS
from workers.contract.events import NDJSON


class ClaimView(AgentAPIView):
    @extend_schema(
        request=AttemptSerializer, responses={200: ClaimReplySerializer, 409: ErrorSerializer}
    )
    def post(self, request: Request, run_id: int) -> Response:
        """Take a dispatched run: 409 if it was cancelled, requeued or is another attempt."""
        data = valid(AttemptSerializer, request)
        run = do_claim_run(request.auth, run_id, data["attempt"])
        placement = run.placement
        reply = {
            "run": run.pk,
            "attempt": run.attempt,
            "spec": share_spec(run, placement),
            "devices": placement.device_indices if placement else run.device_indices,
            "gang": gang_of(run, placement, run.current_placements) if placement else None,
            "max_events": settings.NPULAB["MAX_EVENTS_PER_BATCH"],
        }
        for capability in capabilities.of(run):
            reply.update(capability.claim_reply(run))
        return Response(reply)


class EventsView(AgentAPIView):
    # The JSON form, or the file's own lines, or those with their metrics packed, the offsets
    # in the query (docs/events.md).
    parser_classes = [FastJSONParser, EventLinesParser, EventBlocksParser]

    @extend_schema(
        request={
            "application/json": EventBatchSerializer,
            NDJSON: {"type": "string", "description": LINES_FORM},
            BLOCKS: {"type": "string", "format": "binary", "description": BLOCKS_FORM},
        },
        parameters=LINES_PARAMETERS,
        responses={200: EventAckSerializer, 409: ErrorSerializer},
    )
    def post(self, request: Request, run_id: int) -> Response:
        """Store a batch of events.jsonl; 409 with `expected_start` if it does not follow on."""
        data = valid(
            EventBatchSerializer,
            request,
            context={"max_events": settings.NPULAB["MAX_EVENTS_PER_BATCH"]},
        )
        reply = do_ingest_events(
            request.auth, run_id, data["attempt"], data["start"], data["end"], data["events"]
        )
        return Response(reply)


class FinishView(AgentAPIView):
    @extend_schema(request=FinishSerializer, responses={200: dict, 409: ErrorSerializer})
    def post(self, request: Request, run_id: int) -> Response:
        """The runner exited and every event was sent: the platform decides the outcome."""
        data = valid(FinishSerializer, request)
        run = do_finish_run(request.auth, run_id, data["attempt"], data)
        return Response({"status": run.status, "exit_cause": run.exit_cause})
