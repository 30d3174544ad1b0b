from __future__ import annotations

from typing import Any

from rest_framework import serializers

from npulab.hosts.models import DeviceType, Host

MAX_DEVICES_PER_HOST = 1024


class HostSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:host-detail", lookup_field="name")
    busy_devices = serializers.SerializerMethodField()

    class Meta:
        model = Host
        fields = [
            "name",
            "url",
            "device_type",
            "device_count",
            "busy_devices",
            "devices",
            "labels",
            "enabled",
            "status",
            "last_heartbeat",
            "registered",
            "hostname",
            "worker_version",
            "python_version",
            "platform",
        ]
        read_only_fields = fields

    def get_busy_devices(self, host: Host) -> int:
        annotated = getattr(host, "busy_devices", None)
        return annotated if annotated is not None else host.leases.count()


class DeviceSerializer(serializers.Serializer):
    index = serializers.IntegerField(min_value=0)
    name = serializers.CharField(allow_blank=True, max_length=200)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        # Keep what the worker knows beyond index and name (NPU id, memory ...).
        value = super().to_internal_value(data)
        extra = {key: item for key, item in data.items() if key not in value}
        return {**extra, **value}


class RegisterSerializer(serializers.Serializer):
    """What a host worker reports about its host when it starts."""

    device_type = serializers.ChoiceField(choices=DeviceType.choices)
    devices = DeviceSerializer(many=True, max_length=MAX_DEVICES_PER_HOST)
    labels = serializers.ListField(
        child=serializers.CharField(max_length=64), max_length=50, required=False
    )
    hostname = serializers.CharField(max_length=255, allow_blank=True, required=False)
    worker_version = serializers.CharField(max_length=32, allow_blank=True, required=False)
    python = serializers.CharField(max_length=32, allow_blank=True, required=False)
    run_python = serializers.CharField(max_length=500, allow_blank=True, required=False)
    platform = serializers.CharField(max_length=255, allow_blank=True, required=False)

    def validate_devices(self, devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
        indices = [device["index"] for device in devices]
        if sorted(indices) != list(range(len(devices))):
            raise serializers.ValidationError(
                "devices must be numbered 0..n-1 by their logical index, each once"
            )
        return sorted(devices, key=lambda device: device["index"])


class RegisterReplySerializer(serializers.Serializer):
    name = serializers.CharField()
    queue = serializers.CharField(help_text="The Celery queue to consume.")


class HeartbeatSerializer(serializers.Serializer):
    running = serializers.ListField(child=serializers.IntegerField(min_value=1), max_length=10000)


class HeartbeatReplySerializer(serializers.Serializer):
    cancel = serializers.ListField(
        child=serializers.IntegerField(), help_text="Runs of this host to stop."
    )
    snapshot = serializers.BooleanField(help_text="Send an environment snapshot now.")
