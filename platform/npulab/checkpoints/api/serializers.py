from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

from npulab.checkpoints.models import Checkpoint
from workers.contract.ranks import MAX_RANKS

RANK_PARAMETER = OpenApiParameter(
    "rank",
    {"type": "integer", "minimum": 0, "maximum": MAX_RANKS - 1, "default": 0},
    description="A sharded checkpoint's rank whose shard to send; 0: its own file.",
)


def shard_rank(request: Request) -> int:
    """The ``rank`` a download asks for (0 when it names none); 400 naming it if bad."""
    raw = request.query_params.get("rank", "0")
    if not raw.isdigit() or int(raw) >= MAX_RANKS:
        raise ValidationError({"rank": [f"a rank from 0 to {MAX_RANKS - 1}"]})
    return int(raw)


class CheckpointSerializer(serializers.ModelSerializer):
    class Meta:
        model = Checkpoint
        fields = [
            "step",
            "attempt",
            "bytes",
            "sha256",
            "status",
            "status_reason",
            "pinned",
            "shards",
            "host_path",
            "created",
        ]
        read_only_fields = fields
