from __future__ import annotations

from rest_framework import serializers

from npulab.artifacts.models import Artifact, ArtifactUpload


class ArtifactSerializer(serializers.ModelSerializer):
    class Meta:
        model = Artifact
        fields = [
            "id",
            "run",
            "attempt",
            "kind",
            "name",
            "step",
            "bytes",
            "sha256",
            "status",
            "status_reason",
            "pinned",
            "created",
            "updated",
        ]
        read_only_fields = fields


class UploadCreateSerializer(serializers.Serializer):
    """What a host declares before it sends an artifact's bytes."""

    # Folders (an MLflow artifact's path) are kept in the name only: the stored file's key
    # is the name sanitised (artifacts.services.final_key).
    name = serializers.RegexField(
        r"^(?!/)(?!.*//)(?!.*/$)(?!(?:.*/)?\.{1,2}(?:/|$))[^\\\x00]{1,255}$",
        help_text="A file name, or a relative path with folders by '/' (no '.' or '..' part).",
        error_messages={
            "invalid": "must be a file name or a relative path of 1 to 255 characters, "
            "without '.' or '..' parts"
        },
    )
    kind = serializers.ChoiceField(choices=Artifact.Kind.choices, default=Artifact.Kind.FILE)
    bytes = serializers.IntegerField(min_value=0)
    sha256 = serializers.RegexField(
        r"^[0-9a-fA-F]{64}$", error_messages={"invalid": "must be 64 hexadecimal digits"}
    )
    step = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=0)
    attempt = serializers.IntegerField(
        required=False, min_value=1, help_text="The attempt that wrote it; default: the current."
    )


class UploadSerializer(serializers.ModelSerializer):
    """Where an upload stands: the offset the next chunk starts at, and its artifact."""

    offset = serializers.IntegerField(source="bytes_received")
    bytes = serializers.IntegerField(source="artifact.bytes")
    status = serializers.CharField(source="artifact.status")
    status_reason = serializers.CharField(source="artifact.status_reason")
    artifact = ArtifactSerializer()

    class Meta:
        model = ArtifactUpload
        fields = ["id", "offset", "bytes", "status", "status_reason", "artifact"]
        read_only_fields = fields
