from django.contrib import admin

from npulab.audit.models import AuditEntry


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    """Read-only: the log is written by the services that act, never by hand."""

    list_display = ["at", "actor_label", "action", "target_type", "target_label", "note"]
    list_filter = ["action", "target_type", "actor_kind"]
    search_fields = ["actor_label", "target_label", "target_id", "note"]
    date_hierarchy = "at"

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
