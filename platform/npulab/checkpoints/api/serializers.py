from __future__ import annotations

from rest_framework import serializers

from npulab.checkpoints.models import Checkpoint


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
            "host_path",
            "created",
        ]
        read_only_fields = fields
