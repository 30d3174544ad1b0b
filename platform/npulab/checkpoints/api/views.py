"""The checkpoints of a run in the user API: list, download, pin."""

from __future__ import annotations

from django.http import FileResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from npulab.checkpoints.api.serializers import RANK_PARAMETER, CheckpointSerializer, shard_rank
from npulab.checkpoints.models import Checkpoint
from npulab.checkpoints.services import do_pin_checkpoint, open_stored
from npulab.core.api import OCTET_STREAM, ErrorSerializer
from npulab.runs.access import run_for


class RunCheckpointListView(APIView):
    # The operation's name from when it was an action of the run viewset.
    @extend_schema(
        operation_id="runs_checkpoints_list", responses={200: CheckpointSerializer(many=True)}
    )
    def get(self, request: Request, pk: int) -> Response:
        """The run's checkpoints, newest first: on the host, stored here, damaged or deleted."""
        run = run_for(request.user, pk)
        return Response(CheckpointSerializer(run.checkpoints.all(), many=True).data)


class CheckpointFileDownloadView(APIView):
    @extend_schema(
        parameters=[RANK_PARAMETER],
        responses={
            (200, OCTET_STREAM): OpenApiTypes.BINARY,
            409: ErrorSerializer,
        },
    )
    def get(self, request: Request, run_id: int, step: int) -> FileResponse:
        """A stored checkpoint's state.pt (load it with torch.load(..., weights_only=False)),
        or with `rank` that rank's shard of a sharded one.

        The file is checked against its SHA-256 first: one that no longer matches is marked
        damaged and answered 409 `checkpoint_damaged`, never served."""
        rank = shard_rank(request)
        run = run_for(request.user, run_id)
        checkpoint = get_object_or_404(
            Checkpoint, run=run, step=step, status=Checkpoint.Status.STORED
        )
        name = f"run-{run_id}-step-{step}{f'-rank-{rank}' if rank else ''}.pt"
        return FileResponse(
            open_stored(checkpoint, rank),
            as_attachment=True,
            filename=name,
            # Guessed from ".pt" it would be a SNES page table.
            content_type=OCTET_STREAM,
        )


class CheckpointPinView(APIView):
    @extend_schema(request=None, responses={200: CheckpointSerializer})
    def post(self, request: Request, run_id: int, step: int) -> Response:
        """Keep this checkpoint whatever the run's keep_checkpoints says."""
        return self._pin(request, run_id, step, True)

    @extend_schema(request=None, responses={200: CheckpointSerializer})
    def delete(self, request: Request, run_id: int, step: int) -> Response:
        """Let the retention delete it again."""
        return self._pin(request, run_id, step, False)

    def _pin(self, request: Request, run_id: int, step: int, pinned: bool) -> Response:
        run = run_for(request.user, run_id, doing="pin its checkpoints")
        checkpoint = get_object_or_404(Checkpoint, run=run, step=step)
        return Response(CheckpointSerializer(do_pin_checkpoint(checkpoint, pinned)).data)
