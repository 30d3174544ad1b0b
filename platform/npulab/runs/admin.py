from django.contrib import admin

from npulab.runs.models import DeviceLease, Run


class DeviceLeaseInline(admin.TabularInline):
    model = DeviceLease
    extra = 0
    readonly_fields = ["host", "device_index", "created"]
    can_delete = False


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    """Read-mostly: state changes go through the services, not through this form."""

    list_display = ["id", "kind", "name", "status", "host", "attempt", "created", "finished_at"]
    list_filter = ["status", "kind", "device_type", "host"]
    search_fields = ["id", "name"]
    inlines = [DeviceLeaseInline]
    readonly_fields = [
        field.name for field in Run._meta.fields if field.name not in ("name", "tags", "priority")
    ]

    def has_add_permission(self, request) -> bool:
        return False
