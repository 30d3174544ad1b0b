"""The host worker's artifact uploads: declare a file, send it in chunks, resume.

A tus-like protocol: ``POST runs/<id>/uploads/`` declares the artifact (name,
kind, bytes, sha256, step) and answers the upload's id at offset 0; ``PUT``
of the upload sends the chunk that starts at its ``Upload-Offset`` header;
``GET``/``HEAD`` tells where the upload is, which is how a host goes on
after an outage or a restart. Only the host the writing attempt ran on may
upload (the attempt's host, or any host holding a share of it).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from npulab.agent.api.base import AgentAPIView, valid
from npulab.artifacts.api.serializers import UploadCreateSerializer, UploadSerializer
from npulab.artifacts.models import Artifact, ArtifactUpload
from npulab.artifacts.services import NoRoom, StoreFull, do_append_chunk, do_create_upload
from npulab.core import errors
from npulab.runs import capabilities
from npulab.runs.capabilities import UploadRefused
from npulab.runs.models import Placement, Run, RunAttempt

OFFSET_HEADER = "Upload-Offset"
READ_BLOCK = 1 << 20


def _check_host(request: Request, run_id: int, attempt: int) -> None:
    # The attempt's host, or any host holding a share of it (a gang's, placements apart).
    host = request.auth
    if RunAttempt.objects.filter(run_id=run_id, number=attempt, host=host).exists():
        return
    if not Placement.objects.filter(run_id=run_id, attempt=attempt, host=host).exists():
        raise PermissionDenied(f"attempt {attempt} of run {run_id} did not run on this host")


def _reply(upload: ArtifactUpload, code: int = status.HTTP_200_OK) -> Response:
    body = UploadSerializer(upload).data
    if code == status.HTTP_422_UNPROCESSABLE_ENTITY:
        # An error body like every other (code, detail), with where the upload stands.
        body = {"code": errors.UNPROCESSABLE, "detail": upload.artifact.status_reason, **body}
    response = Response(body, status=code)
    response[OFFSET_HEADER] = str(upload.bytes_received)
    return response


class UploadCreateView(AgentAPIView):
    @extend_schema(
        request=UploadCreateSerializer,
        responses={201: UploadSerializer, 413: OpenApiTypes.OBJECT},
    )
    def post(self, request: Request, run_id: int) -> Response:
        """Declare an artifact of the run and open its upload; 413 past the size limit.

        A capability's file names what its events declared: a `checkpoint`
        its `step`, matching that step's checkpoint event.
        """
        data = valid(UploadCreateSerializer, request)
        run = get_object_or_404(Run, pk=run_id)
        capability = capabilities.for_artifact(data["kind"])
        if capability is not None:
            # A capability's file (a checkpoint) must match what the run's events said of it.
            try:
                upload = capability.open_upload(request.auth, run, data)
            except NoRoom as full:
                # Refused before a byte: the capability's row still says why it waits.
                capability.upload_waiting(run.pk, data.get("step"), full.detail["detail"])
                raise
            except UploadRefused as refused:
                return Response(
                    {"code": errors.UNPROCESSABLE, "detail": refused.detail},
                    status=status.HTTP_422_UNPROCESSABLE_ENTITY,
                )
        else:
            attempt = data.get("attempt") or run.attempt
            _check_host(request, run_id, attempt)
            upload = do_create_upload(
                run,
                attempt,
                name=data["name"],
                kind=data["kind"],
                size=data["bytes"],
                sha256=data["sha256"],
                step=data["step"],
            )
        return _reply(upload, status.HTTP_201_CREATED)


class UploadView(AgentAPIView):
    def _upload(self, request: Request, run_id: int, upload_id: Any) -> ArtifactUpload:
        upload = get_object_or_404(
            ArtifactUpload.objects.select_related("artifact"),
            pk=upload_id,
            artifact__run_id=run_id,
        )
        _check_host(request, run_id, upload.artifact.attempt)
        return upload

    @extend_schema(responses={200: UploadSerializer})
    def get(self, request: Request, run_id: int, upload_id: Any) -> Response:
        """Where the upload is: the next chunk starts at `offset` (and `Upload-Offset`)."""
        return _reply(self._upload(request, run_id, upload_id))

    @extend_schema(
        request={"application/octet-stream": {"type": "string", "format": "binary"}},
        parameters=[
            OpenApiParameter(
                OFFSET_HEADER,
                {"type": "integer", "minimum": 0},
                OpenApiParameter.HEADER,
                required=True,
                description="The byte of the file this chunk starts at.",
            )
        ],
        responses={200: UploadSerializer, 409: OpenApiTypes.OBJECT, 422: UploadSerializer},
    )
    def put(self, request: Request, run_id: int, upload_id: Any) -> Response:
        """Send the chunk at `Upload-Offset`; 409 with `expected_offset` if it is not where
        the upload is. The last chunk finishes it: `stored` if bytes and SHA-256 match,
        else 422 and `damaged` (nothing is kept)."""
        upload = self._upload(request, run_id, upload_id)
        raw = request.headers.get(OFFSET_HEADER, "")
        if not raw.strip().isdigit():
            raise ValidationError({OFFSET_HEADER: ["a non-negative integer is required"]})
        stream = request.stream
        chunks = iter(lambda: stream.read(READ_BLOCK), b"") if stream is not None else iter(())
        try:
            upload = do_append_chunk(upload.pk, int(raw), chunks)
        except StoreFull as full:
            capability = capabilities.for_artifact(upload.artifact.kind)
            if capability is not None:
                artifact = upload.artifact
                capability.upload_waiting(artifact.run_id, artifact.step, full.detail["detail"])
            raise
        artifact = upload.artifact
        capability = capabilities.for_artifact(artifact.kind)
        if capability is not None and artifact.status != Artifact.Status.UPLOADING:
            capability.on_upload(artifact)
        if artifact.status == Artifact.Status.DAMAGED:
            return _reply(upload, status.HTTP_422_UNPROCESSABLE_ENTITY)
        return _reply(upload)
