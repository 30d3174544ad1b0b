from __future__ import annotations

from rest_framework import serializers

from npulab.hosts.models import Host


class HostSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:host-detail", lookup_field="name")
    busy_devices = serializers.SerializerMethodField()
    pool = serializers.SlugRelatedField(
        slug_field="name", read_only=True, help_text="The pool the host is in."
    )

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
            "reported_labels",
            "devices_unverified",
            "pool",
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
