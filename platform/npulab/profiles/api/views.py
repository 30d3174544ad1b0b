"""The profiles API: a run's profiles and the import of a trace, one profile with its
summary, its stored trace, and asking for its summary again."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import FileResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import APIException, PermissionDenied, ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from npulab.artifacts.models import Artifact
from npulab.artifacts.services import open_artifact
from npulab.core import errors
from npulab.core.api import OCTET_STREAM, ErrorSerializer
from npulab.core.text import served_filename
from npulab.profiles.access import visible_profiles
from npulab.profiles.api.serializers import (
    ProfileDetailSerializer,
    ProfileImportSerializer,
    ProfileSerializer,
)
from npulab.profiles.models import Profile
from npulab.profiles.services import do_import_profile, do_resummarise_profile
from npulab.profiles.traces import TraceRefused, check_upload, limit_upload
from npulab.runs.access import change_refused, run_for
from npulab.runs.models import Run


class TraceTooLarge(APIException):
    """413 with the limit as a number, like the artifact store's own."""

    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = errors.PAYLOAD_TOO_LARGE

    def __init__(self, refused: TraceRefused) -> None:
        super().__init__(str(refused))
        self.detail = {"detail": str(refused), **refused.fields}  # type: ignore[assignment]


def import_trace(run: Run, upload: Any, user: Any) -> Profile:
    """An uploaded file as a profile of ``run``; the API's errors for what is refused."""
    refused = change_refused(user, run, "add a profile to it")
    if refused:
        raise PermissionDenied(refused)
    try:
        return do_import_profile(run, upload, upload.name, upload.size, user)
    except TraceRefused as refused:
        raise _api_error(refused) from refused


def _api_error(refused: TraceRefused) -> APIException:
    if refused.status == status.HTTP_413_REQUEST_ENTITY_TOO_LARGE:
        return TraceTooLarge(refused)
    return ValidationError({"file": [str(refused)]})


class RunProfileListView(generics.ListCreateAPIView):
    """A run's profiles, newest first; POST imports a trace made elsewhere."""

    serializer_class = ProfileSerializer
    filterset_fields = ["status", "source", "format", "rank"]
    parser_classes = [MultiPartParser, FormParser]

    def get_queryset(self) -> QuerySet[Profile]:
        if getattr(self, "swagger_fake_view", False):  # the schema generator has no run
            return Profile.objects.none()
        return Profile.objects.filter(run_id=self.kwargs["run_id"])

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        run_for(request.user, self.kwargs["run_id"])
        return super().list(request, *args, **kwargs)

    @extend_schema(
        request={"multipart/form-data": ProfileImportSerializer},
        responses={
            201: ProfileSerializer,
            400: OpenApiResponse(ErrorSerializer, description="Not a trace npulab reads."),
            413: OpenApiResponse(
                ErrorSerializer, description="Over NPULAB_PROFILE_MAX_BYTES; nothing stored."
            ),
        },
    )
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Import a Kineto trace (.json, .json.gz) or an ascend_pt folder (.tar, .tar.gz)."""
        run = run_for(request.user, self.kwargs["run_id"])
        try:
            handler = limit_upload(request._request)
            data = request.data
            check_upload(handler)
        except TraceRefused as refused:
            raise _api_error(refused) from refused
        form = ProfileImportSerializer(data=data)
        form.is_valid(raise_exception=True)
        profile = import_trace(run, form.validated_data["file"], request.user)
        return Response(ProfileSerializer(profile).data, status=status.HTTP_201_CREATED)


class ProfileDetailView(generics.RetrieveAPIView):
    """One profile with its summary and what its timeline index holds."""

    serializer_class = ProfileDetailSerializer
    queryset = Profile.objects.all()

    def get_queryset(self) -> QuerySet[Profile]:
        return visible_profiles(self.request.user, super().get_queryset())


class ProfileDownloadView(APIView):
    @extend_schema(responses={(200, OCTET_STREAM): OpenApiTypes.BINARY})
    def get(self, request: Request, pk: int) -> FileResponse:
        """The stored trace, compressed as kept (``*.json.gz`` or ``*.tar.gz``)."""
        profile = get_object_or_404(
            visible_profiles(request.user, Profile.objects.select_related("artifact")),
            pk=pk,
            artifact__status=Artifact.Status.STORED,
        )
        return FileResponse(
            open_artifact(profile.artifact),
            as_attachment=True,
            filename=served_filename(profile.name),
            content_type=OCTET_STREAM,
        )


class ProfileSummariseView(APIView):
    @extend_schema(request=None, responses={202: ProfileSerializer})
    def post(self, request: Request, pk: int) -> Response:
        """Summarise and index the profile again (after a failure, or a newer npulab)."""
        profiles = visible_profiles(request.user, Profile.objects.select_related("run"))
        profile = get_object_or_404(profiles, pk=pk)
        refused = change_refused(request.user, profile.run, "summarise it again")
        if refused:
            raise PermissionDenied(refused)
        profile = do_resummarise_profile(profile)
        return Response(ProfileSerializer(profile).data, status=status.HTTP_202_ACCEPTED)
