"""A run's artifacts for users: the list, and each stored file's download.

They live here, not in the artifact store's app below runs, because a run's
files are shown only to who may see the run (``npulab.runs.access``).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import FileResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from npulab.artifacts.api.serializers import ArtifactSerializer
from npulab.artifacts.models import Artifact
from npulab.artifacts.services import open_artifact
from npulab.core.api import OCTET_STREAM
from npulab.core.text import served_filename
from npulab.runs.access import run_for


class RunArtifactListView(generics.ListAPIView):
    """A run's artifacts, newest first: uploading, stored, damaged or deleted."""

    serializer_class = ArtifactSerializer
    filterset_fields = ["kind", "status"]

    def get_queryset(self) -> QuerySet[Artifact]:
        if getattr(self, "swagger_fake_view", False):  # the schema generator has no run
            return Artifact.objects.none()
        return Artifact.objects.filter(run_id=self.kwargs["run_id"])

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        run_for(request.user, self.kwargs["run_id"])
        return super().list(request, *args, **kwargs)


class ArtifactDownloadView(APIView):
    @extend_schema(responses={(200, OCTET_STREAM): OpenApiTypes.BINARY})
    def get(self, request: Request, run_id: int, artifact_id: int) -> FileResponse:
        """A stored artifact's file, streamed from the storage."""
        run = run_for(request.user, run_id)
        artifact = get_object_or_404(
            Artifact, pk=artifact_id, run=run, status=Artifact.Status.STORED
        )
        return FileResponse(
            open_artifact(artifact),
            as_attachment=True,
            filename=served_filename(artifact.name),
            content_type=OCTET_STREAM,
        )
