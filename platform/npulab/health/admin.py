from django.contrib import admin

from npulab.health.models import DeviceHealth, HealthChange, HostHealth


@admin.register(HostHealth)
class HostHealthAdmin(admin.ModelAdmin):
    """Read the state here; drain and undrain on the host page or the API (they are audited)."""

    list_display = ["host", "state", "changed_at", "drained", "drain_note"]
    list_filter = ["state", "drained"]
    search_fields = ["host__name", "drain_note"]
    readonly_fields = [f.name for f in HostHealth._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(DeviceHealth)
class DeviceHealthAdmin(admin.ModelAdmin):
    list_display = ["host", "index", "state", "changed_at"]
    list_filter = ["state"]
    search_fields = ["host__name"]
    readonly_fields = [f.name for f in DeviceHealth._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(HealthChange)
class HealthChangeAdmin(admin.ModelAdmin):
    list_display = ["at", "host", "device", "previous", "state", "by", "webhook_delivered_at"]
    list_filter = ["state"]
    search_fields = ["host__name", "note"]
    readonly_fields = [f.name for f in HealthChange._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
