from __future__ import annotations

from typing import Any

from rest_framework import serializers

from npulab.snapshots.compatibility import snapshot_compatibility
from npulab.snapshots.models import HostVersion, Snapshot


class SnapshotSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:snapshot-detail")
    host = serializers.SlugRelatedField(slug_field="name", read_only=True)
    hash = serializers.CharField(source="content_hash", read_only=True)
    known_good = serializers.BooleanField(read_only=True)
    known_good_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

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


class DiffQuerySerializer(serializers.Serializer):
    a = serializers.PrimaryKeyRelatedField(queryset=Snapshot.objects.all())
    b = serializers.PrimaryKeyRelatedField(queryset=Snapshot.objects.all())


class PlannedTargetSerializer(serializers.Serializer):
    cann = serializers.CharField(max_length=40, required=False, allow_blank=True)
    torch_npu = serializers.CharField(max_length=40, required=False, allow_blank=True)
    torch = serializers.CharField(max_length=40, required=False, allow_blank=True)
    python = serializers.CharField(max_length=20, required=False, allow_blank=True)


class ReviewQuerySerializer(PlannedTargetSerializer):
    target = serializers.PrimaryKeyRelatedField(queryset=Snapshot.objects.all(), required=False)

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
