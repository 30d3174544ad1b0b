from django.contrib import admin

from npulab.hosts.models import Host
from npulab.hosts.services import do_move_host_to_pool


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "device_type",
        "device_count",
        "pool",
        "status",
        "enabled",
        "last_heartbeat",
    ]
    list_filter = ["device_type", "pool", "status", "enabled"]
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

    def save_model(self, request, obj: Host, form, change: bool) -> None:
        # A move between pools goes through its service, which writes the audit entry.
        if change and "pool" in form.changed_data:
            pool, obj.pool = obj.pool, Host.objects.get(pk=obj.pk).pool
            super().save_model(request, obj, form, change)
            do_move_host_to_pool(obj, pool, by=request.user)
            return
        super().save_model(request, obj, form, change)
