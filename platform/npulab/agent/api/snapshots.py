"""The host worker's snapshot upload."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from npulab.agent.api.base import AgentAPIView
from npulab.agent.api.serializers import SnapshotRecordedSerializer, SnapshotUploadSerializer
from npulab.agent.services import do_upload_snapshot
from npulab.core import errors
from npulab.snapshots.content import SnapshotInvalid


class SnapshotUploadView(AgentAPIView):
    @extend_schema(
        request=SnapshotUploadSerializer,
        responses={201: SnapshotRecordedSerializer, 200: SnapshotRecordedSerializer},
    )
    def post(self, request: Request) -> Response:
        """Record this host's environment: 201 for a new version, 200 when unchanged."""
        limit = settings.NPULAB["MAX_SNAPSHOT_BYTES"]
        size = int(request.META.get("CONTENT_LENGTH") or 0) or len(request.body)
        if size > limit:
            return Response(
                {
                    "code": errors.PAYLOAD_TOO_LARGE,
                    "detail": f"snapshot upload of {size} bytes is over the limit of "
                    f"{limit} bytes (NPULAB_MAX_SNAPSHOT_BYTES)",
                },
                status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            )
        serializer = SnapshotUploadSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            recorded = do_upload_snapshot(request.auth, data["snapshot"], data.get("run"))
        except SnapshotInvalid as exc:
            raise ValidationError({"snapshot": [str(exc)]}) from None
        body = {
            "id": recorded.snapshot.pk,
            "hash": recorded.snapshot.content_hash,
            "new_version": recorded.new_version,
            "change": recorded.version.change,
        }
        code = status.HTTP_201_CREATED if recorded.new_version else status.HTTP_200_OK
        return Response(body, status=code)
