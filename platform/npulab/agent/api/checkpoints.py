"""The checkpoints capability's host endpoint: a checkpoint's file, uploaded whole by the
host that wrote it (the older single-PUT form; the chunked one is ``artifacts.py``) and
fetched by the host a new attempt resumes on."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import FileResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from npulab.agent.api.base import AgentAPIView
from npulab.checkpoints.api.serializers import RANK_PARAMETER, CheckpointSerializer, shard_rank
from npulab.checkpoints.models import Checkpoint
from npulab.checkpoints.services import open_stored, store_upload
from npulab.core import errors
from npulab.core.api import OCTET_STREAM, ErrorSerializer
from npulab.runs.gangs import placement_on
from npulab.runs.models import RunAttempt

UPLOAD_CHUNK = 1 << 20


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

    @extend_schema(
        parameters=[RANK_PARAMETER],
        responses={(200, OCTET_STREAM): OpenApiTypes.BINARY, 409: ErrorSerializer},
    )
    def get(self, request: Request, run_id: int, step: int) -> FileResponse:
        """Download a stored checkpoint (or one rank's shard of it) to resume the run here."""
        rank = shard_rank(request)
        checkpoint = get_object_or_404(
            Checkpoint, run_id=run_id, step=step, status=Checkpoint.Status.STORED
        )
        run = checkpoint.run
        # Every host of a gang resumes from it.
        if run.host_id != request.auth.pk and not placement_on(run, request.auth):
            raise PermissionDenied(f"run {run_id} is not placed on host {request.auth.name}")
        return FileResponse(open_stored(checkpoint, rank), content_type=OCTET_STREAM)
