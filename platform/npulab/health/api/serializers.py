from __future__ import annotations

from rest_framework import serializers

from npulab.audit.models import AuditEntry
from npulab.health.models import DeviceHealth, HostHealth
from npulab.health.services import MAX_NOTE_CHARS


class ReasonSerializer(serializers.Serializer):
    rule = serializers.CharField()
    level = serializers.CharField()
    detail = serializers.CharField()
    device = serializers.IntegerField(allow_null=True)
    since = serializers.CharField()


class DeviceHealthSerializer(serializers.ModelSerializer):
    # Declared: a model integer's range in the schema would differ by database.
    index = serializers.IntegerField(read_only=True)
    reasons = ReasonSerializer(many=True, read_only=True)

    class Meta:
        model = DeviceHealth
        fields = ["index", "state", "reasons", "changed_at"]


class HostHealthSerializer(serializers.ModelSerializer):
    host = serializers.CharField(source="host.name", read_only=True)
    reasons = ReasonSerializer(many=True, read_only=True)
    drained_by = serializers.SerializerMethodField()
    devices = serializers.SerializerMethodField()

    class Meta:
        model = HostHealth
        fields = [
            "host",
            "state",
            "reasons",
            "changed_at",
            "drained",
            "drain_note",
            "drained_by",
            "drained_at",
            "devices",
        ]

    def get_drained_by(self, health: HostHealth) -> str | None:
        return health.drained_by.get_username() if health.drained_by else None

    def get_devices(self, health: HostHealth) -> list[dict]:
        rows = DeviceHealth.objects.filter(host_id=health.host_id).order_by("index")
        return DeviceHealthSerializer(rows, many=True).data


class DrainSerializer(serializers.Serializer):
    note = serializers.CharField(
        max_length=MAX_NOTE_CHARS,
        help_text="Why the host is drained; shown on the host page and in waiting runs' reasons.",
    )


class UndrainSerializer(serializers.Serializer):
    note = serializers.CharField(
        max_length=MAX_NOTE_CHARS, required=False, allow_blank=True, default=""
    )


class ClearDeviceSerializer(UndrainSerializer):
    pass


class AuditEntrySerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor_label")

    class Meta:
        model = AuditEntry
        fields = [
            "id",
            "at",
            "actor_kind",
            "actor",
            "action",
            "target_type",
            "target_id",
            "target_label",
            "note",
            "data",
        ]
