from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from npulab.core.converters import MAX_ID
from npulab.snapshots.compatibility import snapshot_compatibility
from npulab.snapshots.models import HostVersion, Snapshot

SNAPSHOT_ID = {"type": "integer", "minimum": 1, "maximum": MAX_ID}


class SnapshotSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:snapshot-detail")
    host = serializers.SlugRelatedField(slug_field="name", read_only=True)
    hash = serializers.CharField(source="content_hash", read_only=True)
    known_good = serializers.BooleanField(read_only=True)
    known_good_by = serializers.SlugRelatedField(
        slug_field="username",
        read_only=True,
        allow_null=True,
        help_text="Who marked it known good; null while it is not, or once that account is gone.",
    )

    class Meta:
        model = Snapshot
        fields = [
            "id",
            "url",
            "hash",
            "host",
            "python",
            "summary",
            "first_seen",
            "last_seen",
            "known_good",
            "known_good_by",
            "known_good_at",
            "known_good_note",
        ]
        read_only_fields = fields


class SnapshotDetailSerializer(SnapshotSerializer):
    compatibility = serializers.SerializerMethodField()

    class Meta(SnapshotSerializer.Meta):
        fields = [*SnapshotSerializer.Meta.fields, "compatibility", "data"]
        read_only_fields = fields

    def get_compatibility(self, snapshot: Snapshot) -> dict[str, Any]:
        return snapshot_compatibility(snapshot.data)


class HostVersionSerializer(serializers.ModelSerializer):
    snapshot = serializers.PrimaryKeyRelatedField(read_only=True)
    hash = serializers.CharField(source="snapshot.content_hash", read_only=True)
    summary = serializers.JSONField(source="snapshot.summary", read_only=True)
    known_good = serializers.BooleanField(source="snapshot.known_good", read_only=True)

    class Meta:
        model = HostVersion
        fields = [
            "id",
            "snapshot",
            "hash",
            "python",
            "change",
            "first_seen",
            "last_seen",
            "known_good",
            "summary",
        ]
        read_only_fields = fields


class KnownGoodSerializer(serializers.Serializer):
    note = serializers.CharField(max_length=2000, allow_blank=True, required=False, default="")


@extend_schema_field(SNAPSHOT_ID)
class SnapshotIdField(serializers.PrimaryKeyRelatedField):
    """A snapshot named by its id: one no 64-bit column holds names none (SQLite would overflow)."""

    def to_internal_value(self, data: Any) -> Any:
        text = str(data)
        if (
            not isinstance(data, bool)
            and text.lstrip("-").isdigit()
            and not 1 <= int(text) <= MAX_ID
        ):
            self.fail("does_not_exist", pk_value=data)
        return super().to_internal_value(data)


class DiffQuerySerializer(serializers.Serializer):
    a = SnapshotIdField(queryset=Snapshot.objects.all())
    b = SnapshotIdField(queryset=Snapshot.objects.all())


class PlannedTargetSerializer(serializers.Serializer):
    cann = serializers.CharField(max_length=40, required=False, allow_blank=True)
    torch_npu = serializers.CharField(max_length=40, required=False, allow_blank=True)
    torch = serializers.CharField(max_length=40, required=False, allow_blank=True)
    python = serializers.CharField(max_length=20, required=False, allow_blank=True)


class ReviewQuerySerializer(PlannedTargetSerializer):
    target = SnapshotIdField(queryset=Snapshot.objects.all(), required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        planned = {k: v for k, v in attrs.items() if k != "target" and v}
        if "target" in attrs and planned:
            raise serializers.ValidationError(
                {"target": ["give a target snapshot or planned versions, not both"]}
            )
        if "target" not in attrs and not planned:
            raise serializers.ValidationError(
                {"target": ["give a target snapshot, or planned cann / torch_npu / torch / python"]}
            )
        attrs["planned"] = planned or None
        return attrs
