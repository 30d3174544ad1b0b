"""The handoff capability's host endpoint: a file one host of a run attempt handed over,
fetched by another host of the same attempt (a parity run's side B fetches side A's dump).
The upload is the generic chunked one (``artifacts.py``), opened by the capability."""

from __future__ import annotations

from django.http import FileResponse, Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request

from npulab.agent.api.base import AgentAPIView
from npulab.artifacts.services import do_verify_stored, open_artifact
from npulab.core.api import OCTET_STREAM, ErrorSerializer
from npulab.handoff.services import damaged, file_for
from npulab.runs.models import Run


class HandoffFileView(AgentAPIView):
    @extend_schema(responses={(200, OCTET_STREAM): OpenApiTypes.BINARY, 409: ErrorSerializer})
    def get(self, request: Request, run_id: int, file_id: int) -> FileResponse:
        """Download a stored handoff file of the run's current attempt, to one of its hosts;
        one that no longer matches its SHA-256 is marked damaged and answered 409."""
        run = get_object_or_404(Run, pk=run_id)
        artifact = file_for(run, request.auth, file_id)
        if artifact is None:
            raise Http404(f"no handoff file {file_id} of run {run_id} for this host")
        if not do_verify_stored(artifact):
            raise damaged(artifact)
        return FileResponse(open_artifact(artifact), content_type=OCTET_STREAM)
