"""The host worker's device telemetry: batches of samples (workers.contract.telemetry)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from npulab.agent.api.base import AgentAPIView, valid
from npulab.agent.api.serializers import PassThroughField
from npulab.core.api import FastJSONParser
from npulab.telemetry.services import record_samples
from workers.contract.telemetry import MAX_BATCH


@extend_schema_field({"type": "array", "maxItems": MAX_BATCH, "items": {}})
class SamplesField(PassThroughField):
    """A batch's samples: a list, as parsed."""


class TelemetryBatchSerializer(serializers.Serializer):
    # As parsed, not re-encoded: each sample is checked on its own (validate_sample).
    samples = SamplesField(
        help_text=(
            f"At most {MAX_BATCH} samples, each {{time, index, health, readings, processes, "
            "error}} as workers.contract.telemetry defines them; each is checked on its own."
        )
    )

    def validate_samples(self, value: Any) -> list[Any]:
        if not isinstance(value, list):
            raise serializers.ValidationError("must be a list of samples")
        if len(value) > MAX_BATCH:
            raise serializers.ValidationError(f"at most {MAX_BATCH} samples a batch")
        return value


class RejectedSampleSerializer(serializers.Serializer):
    index = serializers.IntegerField(help_text="The sample's position in the batch.")
    field = serializers.CharField(help_text="What is wrong in it, e.g. readings.power_w.")
    message = serializers.CharField()


class TelemetryReplySerializer(serializers.Serializer):
    accepted = serializers.IntegerField(help_text="Valid samples: stored now or before.")
    stored = serializers.IntegerField(help_text="Of those, the ones not stored before.")
    rejected = RejectedSampleSerializer(many=True)


class TelemetryView(AgentAPIView):
    parser_classes = [FastJSONParser]

    @extend_schema(request=TelemetryBatchSerializer, responses={200: TelemetryReplySerializer})
    def post(self, request: Request) -> Response:
        """Store a batch of device samples; 200 with the ones rejected and why.

        A sample no newer than its device's latest stored one was stored before (a resent
        batch) and is accepted without being stored twice."""
        if not isinstance(request.data, dict):
            raise serializers.ValidationError({"samples": ["the body must be an object"]})
        data = valid(TelemetryBatchSerializer, request)
        return Response(record_samples(request.auth, data["samples"]).reply())
