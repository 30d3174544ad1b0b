from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from npulab.hosts.models import Host
from npulab.review.review import Review, review
from npulab.snapshots.api.serializers import (
    SNAPSHOT_ID,
    ReviewQuerySerializer,
    SnapshotSerializer,
)
from npulab.snapshots.selectors import current_snapshot


class UpgradeReviewView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("target", SNAPSHOT_ID, description="A snapshot to move to."),
            OpenApiParameter("cann", str, description="Or planned versions: CANN ..."),
            OpenApiParameter("torch_npu", str),
            OpenApiParameter("torch", str),
            OpenApiParameter("python", str),
        ],
        responses={200: dict},
    )
    def get(self, request: Request, name: str) -> Response:
        """Go / no-go for moving the host's current environment to a target, and why.

        Evidence is pooled by stack (chip, driver, firmware, CANN, Python, torch,
        torch_npu, mindspore): ``numbers`` has each kind's headline numbers on both
        sides (median, min, max, n), the change and whether it is a regression (worse
        than 10 % and outside the noise); ``job_errors`` lists the runs the user ended
        (not counted); ``other_changes`` the package differences beside the stack.
        """
        host = get_object_or_404(Host, name=name)
        current = current_snapshot(host)
        if current is None:
            return Response(
                {"detail": f"host {name} has sent no snapshot yet"},
                status=status.HTTP_409_CONFLICT,
            )
        query = ReviewQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        result = review(
            current,
            query.validated_data.get("target"),
            query.validated_data["planned"],
            viewer=request.user,
        )
        return Response(review_as_dict(result, {"request": request}))


def review_as_dict(result: Review, context: dict[str, Any]) -> dict[str, Any]:
    return {
        "decision": result.decision,
        "reasons": result.reasons,
        "current": SnapshotSerializer(result.current, context=context).data,
        "target": SnapshotSerializer(result.target, context=context).data
        if result.target
        else None,
        "planned": result.planned,
        "changes": result.changes,
        "compatibility": result.compatibility,
        "outcomes": result.outcomes,
        "min_runs": result.min_runs,
        "stack": {"current": result.current_stack, "target": result.target_stack},
        "same_stack": result.same_stack,
        "stack_changes": result.stack_changes,
        "other_changes": result.other_changes,
        "evidence": result.evidence,
        "numbers": numbers_by_kind(result.numbers),
        "job_errors": result.job_errors,
        "unknown_versions": result.unknown_versions,
    }


def numbers_by_kind(numbers: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in numbers:
        grouped.setdefault(row["kind"], []).append(row)
    return grouped
