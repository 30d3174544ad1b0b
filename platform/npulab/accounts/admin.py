from django.contrib import admin

from npulab.accounts.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["display", "user", "name", "created", "last_used"]
    list_filter = ["user"]
    search_fields = ["name", "user__username", "display"]
    readonly_fields = ["display", "digest", "created", "last_used"]

    def has_add_permission(self, request) -> bool:
        # A token made here could never be shown; `manage.py api_token` prints one.
        return False
