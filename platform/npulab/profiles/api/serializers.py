from __future__ import annotations

from rest_framework import serializers

from npulab.profiles.models import Profile


class ProfileSerializer(serializers.ModelSerializer):
    """A profile without its summary (the list); the detail adds ``summary`` and ``index``."""

    class Meta:
        model = Profile
        fields = [
            "id",
            "run",
            "artifact",
            "name",
            "rank",
            "source",
            "format",
            "status",
            "error",
            "bytes",
            "raw_bytes",
            "created",
            "updated",
            "ready_at",
        ]
        read_only_fields = fields


class ProfileDetailSerializer(ProfileSerializer):
    summary = serializers.JSONField(
        help_text="The summary (docs/profiles.md, Summary); {} until the profile is ready."
    )
    index = serializers.JSONField(
        help_text="What the timeline index holds (its time range, lanes); {} until ready."
    )

    class Meta(ProfileSerializer.Meta):
        fields = [*ProfileSerializer.Meta.fields, "summary", "index"]
        read_only_fields = fields


class ProfileImportSerializer(serializers.Serializer):
    """A trace made elsewhere, as a multipart upload."""

    file = serializers.FileField(
        help_text="A Kineto/Chrome trace (.json, .json.gz) or a torch_npu *_ascend_pt folder "
        "as a tar (.tar, .tar.gz, .tgz).",
        allow_empty_file=False,
    )
