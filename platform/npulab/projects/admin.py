from django.contrib import admin

from npulab.projects.models import Membership, Pool, Project


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Pool)
class PoolAdmin(admin.ModelAdmin):
    list_display = ["name", "description", "created"]
    search_fields = ["name"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created"]
    search_fields = ["slug", "name"]
    filter_horizontal = ["pools"]
    inlines = [MembershipInline]
