"""A run's artifacts for users: the list, and each stored file's download."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import FileResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from npulab.artifacts.api.serializers import ArtifactSerializer
from npulab.artifacts.models import Artifact
from npulab.artifacts.services import open_artifact


def _run_or_404(run_id: int) -> None:
    # The run model by the foreign key, not by import: the store sits below runs.
    get_object_or_404(Artifact._meta.get_field("run").related_model, pk=run_id)


class RunArtifactListView(generics.ListAPIView):
    """A run's artifacts, newest first: uploading, stored, damaged or deleted."""

    serializer_class = ArtifactSerializer
    filterset_fields = ["kind", "status"]

    def get_queryset(self) -> QuerySet[Artifact]:
        if getattr(self, "swagger_fake_view", False):  # the schema generator has no run
            return Artifact.objects.none()
        return Artifact.objects.filter(run_id=self.kwargs["run_id"])

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        _run_or_404(self.kwargs["run_id"])
        return super().list(request, *args, **kwargs)


class ArtifactDownloadView(APIView):
    @extend_schema(responses={(200, "application/octet-stream"): str})
    def get(self, request: Request, run_id: int, artifact_id: int) -> FileResponse:
        """A stored artifact's file, streamed from the storage."""
        artifact = get_object_or_404(
            Artifact, pk=artifact_id, run_id=run_id, status=Artifact.Status.STORED
        )
        return FileResponse(
            open_artifact(artifact),
            as_attachment=True,
            filename=artifact.name,
            content_type="application/octet-stream",
        )
