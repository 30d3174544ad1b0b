from django.contrib import admin

from npulab.profiles.models import Profile


@admin.register(Profile)
class ProfileAdmin(admin.ModelAdmin):
    """Read-only: profiles change through uploads, imports and the summary task."""

    list_display = ["id", "run", "name", "source", "format", "status", "bytes", "created"]
    list_filter = ["source", "format", "status"]
    search_fields = ["run__id", "name"]
    readonly_fields = [field.name for field in Profile._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False
