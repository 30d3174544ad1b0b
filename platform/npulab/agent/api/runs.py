"""The host worker's run endpoints: claim, stream events, report the end.

Host token only; a host may touch only the runs placed on it.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import FileResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status
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
from npulab.core import errors
from npulab.core.api import OCTET_STREAM, ErrorSerializer, FastJSONParser
from npulab.runs.api.serializers import CheckpointSerializer
from npulab.runs.checkpoints import open_stored, resume_point, store_upload
from npulab.runs.models import Checkpoint, RunAttempt
from npulab.runs.services import do_claim_run, do_finish_run, do_ingest_events
from workers.contract.blocks import BLOCKS
from workers.contract.events import NDJSON

UPLOAD_CHUNK = 1 << 20


class ClaimView(AgentAPIView):
    @extend_schema(
        request=AttemptSerializer, responses={200: ClaimReplySerializer, 409: ErrorSerializer}
    )
    def post(self, request: Request, run_id: int) -> Response:
        """Take a dispatched run: 409 if it was cancelled, requeued or is another attempt."""
        data = valid(AttemptSerializer, request)
        run = do_claim_run(request.auth, run_id, data["attempt"])
        resume = resume_point(run)
        return Response(
            {
                "run": run.pk,
                "attempt": run.attempt,
                "spec": run.spec,
                "devices": run.device_indices,
                "resume": {"step": resume.step, "bytes": resume.bytes, "sha256": resume.sha256}
                if resume
                else None,
                "max_events": settings.NPULAB["MAX_EVENTS_PER_BATCH"],
            }
        )


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


class CheckpointFileView(AgentAPIView):
    """A checkpoint's state.pt: uploaded by the host that wrote it, fetched to resume."""

    @extend_schema(
        request={"application/octet-stream": {"type": "string", "format": "binary"}},
        responses={201: CheckpointSerializer, 409: ErrorSerializer},
    )
    def put(self, request: Request, run_id: int, step: int) -> Response:
        """Upload the file; it is stored only if size and SHA-256 match the checkpoint event."""
        checkpoint = get_object_or_404(
            Checkpoint.objects.select_related("run"), run_id=run_id, step=step
        )
        if not RunAttempt.objects.filter(
            run_id=run_id, number=checkpoint.attempt, host=request.auth
        ).exists():
            raise PermissionDenied(
                f"checkpoint {step} of run {run_id} was not written on this host"
            )
        stream = request.stream
        checkpoint = store_upload(checkpoint, iter(lambda: stream.read(UPLOAD_CHUNK), b""))
        if checkpoint.status != Checkpoint.Status.STORED:
            return Response(
                {"code": errors.UNPROCESSABLE, "detail": checkpoint.status_reason},
                status=status.HTTP_422_UNPROCESSABLE_ENTITY,
            )
        return Response(CheckpointSerializer(checkpoint).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={(200, OCTET_STREAM): OpenApiTypes.BINARY, 409: ErrorSerializer})
    def get(self, request: Request, run_id: int, step: int) -> FileResponse:
        """Download a stored checkpoint to resume the run on this host."""
        checkpoint = get_object_or_404(
            Checkpoint, run_id=run_id, step=step, status=Checkpoint.Status.STORED
        )
        if checkpoint.run.host_id != request.auth.pk:
            raise PermissionDenied(f"run {run_id} is not placed on host {request.auth.name}")
        return FileResponse(open_stored(checkpoint), content_type=OCTET_STREAM)


class FinishView(AgentAPIView):
    @extend_schema(request=FinishSerializer, responses={200: dict, 409: ErrorSerializer})
    def post(self, request: Request, run_id: int) -> Response:
        """The runner exited and every event was sent: the platform decides the outcome."""
        data = valid(FinishSerializer, request)
        run = do_finish_run(request.auth, run_id, data["attempt"], data)
        return Response({"status": run.status, "exit_cause": run.exit_cause})
