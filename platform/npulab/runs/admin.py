import json

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
    # The spec as the API shows it: its env's secrets stay out of the admin too.
    exclude = ["spec"]
    readonly_fields = [
        "redacted_spec",
        *(
            field.name
            for field in Run._meta.fields
            if field.name not in ("name", "tags", "priority", "spec")
        ),
    ]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.display(description="spec")
    def redacted_spec(self, run: Run) -> str:
        return json.dumps(run.display_spec, indent=2)
