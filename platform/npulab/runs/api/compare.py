"""``/api/v1/runs/compare/``: a candidate run against a baseline, as a pipeline gates on it."""

from __future__ import annotations

import math
from dataclasses import asdict

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from npulab.runs.access import visible_runs
from npulab.runs.api.serializers import RunSerializer
from npulab.runs.kinds import DEFAULT_THRESHOLD
from npulab.runs.kinds import get as get_kind
from npulab.runs.models import Run

MAX_RUN_ID = 2**63 - 1
RUN_ID = {"type": "integer", "minimum": 1, "maximum": MAX_RUN_ID}


class CompareQuerySerializer(serializers.Serializer):
    baseline = serializers.IntegerField(min_value=1, max_value=MAX_RUN_ID)
    candidate = serializers.IntegerField(min_value=1, max_value=MAX_RUN_ID)
    threshold = serializers.FloatField(
        min_value=0, max_value=10, default=DEFAULT_THRESHOLD, required=False
    )


class ComparisonSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="`status`, or a headline number of the kind.")
    baseline = serializers.JSONField(allow_null=True)
    candidate = serializers.JSONField(allow_null=True)
    change = serializers.FloatField(
        allow_null=True, help_text="(candidate − baseline) / |baseline|"
    )
    lower_is_better = serializers.BooleanField()
    regression = serializers.BooleanField()


class CompareSerializer(serializers.Serializer):
    kind = serializers.CharField()
    threshold = serializers.FloatField()
    baseline = RunSerializer()
    candidate = RunSerializer()
    comparisons = ComparisonSerializer(many=True)
    regressions = serializers.IntegerField(help_text="What a pipeline gates on.")


class RunCompareView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("baseline", RUN_ID, required=True, description="The reference run."),
            OpenApiParameter("candidate", RUN_ID, required=True, description="The run to judge."),
            OpenApiParameter(
                "threshold",
                {"type": "number", "minimum": 0, "maximum": 10},
                description=f"Relative change that counts as a regression (default "
                f"{DEFAULT_THRESHOLD}).",
            ),
        ],
        responses={200: CompareSerializer},
    )
    def get(self, request: Request) -> Response:
        """Two runs of one kind: how each ended and their headline numbers, with regressions.

        A candidate that did not succeed where the baseline did is a regression; so is a
        headline worse than the baseline's by more than `threshold`.
        """
        query = CompareQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        ids = (query.validated_data["baseline"], query.validated_data["candidate"])
        runs = Run.objects.select_related("host", "submitted_by", "project")
        found = visible_runs(request.user, runs).in_bulk(ids)
        missing = {
            name: ["no such run"]
            for name, pk in zip(("baseline", "candidate"), ids, strict=True)
            if pk not in found
        }
        if missing:
            raise ValidationError(missing)
        baseline, candidate = found[ids[0]], found[ids[1]]
        if baseline.kind != candidate.kind:
            raise ValidationError(
                {"candidate": [f"is a {candidate.kind} run, the baseline a {baseline.kind} run"]}
            )
        threshold = query.validated_data["threshold"]
        rows = [
            asdict(row) for row in get_kind(baseline.kind).compare(baseline, candidate, threshold)
        ]
        for row in rows:
            if isinstance(row["change"], float) and not math.isfinite(row["change"]):
                row["change"] = None
        context = {"request": request}
        return Response(
            {
                "kind": baseline.kind,
                "threshold": threshold,
                "baseline": RunSerializer(baseline, context=context).data,
                "candidate": RunSerializer(candidate, context=context).data,
                "comparisons": rows,
                "regressions": sum(row["regression"] for row in rows),
            }
        )
