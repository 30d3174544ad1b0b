from django.contrib import admin

from npulab.accounts.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = [
        "display",
        "user",
        "name",
        "scopes",
        "created",
        "last_used",
        "expires",
        "revoked",
    ]
    list_filter = ["user"]
    search_fields = ["name", "user__username", "display"]
    readonly_fields = ["display", "digest", "created", "last_used"]

    def has_add_permission(self, request) -> bool:
        # A token made here could never be shown; the API tokens page and
        # `manage.py api_token` show one once.
        return False
