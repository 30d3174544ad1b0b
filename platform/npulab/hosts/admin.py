from django.contrib import admin

from npulab.hosts.models import Host


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    list_display = ["name", "device_type", "device_count", "status", "enabled", "last_heartbeat"]
    list_filter = ["device_type", "status", "enabled"]
    search_fields = ["name", "hostname"]
    readonly_fields = [
        "device_type",
        "device_count",
        "devices",
        "status",
        "last_heartbeat",
        "registered",
        "hostname",
        "worker_version",
        "python_version",
        "platform",
        "token_display",
        "created",
        "updated",
    ]
    exclude = ["token_digest"]
