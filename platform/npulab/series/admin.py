from __future__ import annotations

from typing import Any

from django.contrib import admin

from npulab.series.models import MetricSeries


@admin.register(MetricSeries)
class MetricSeriesAdmin(admin.ModelAdmin):
    """Read-only: points come in through the ingest, and go with their run or host."""

    list_display = ["key", "run", "host", "device_index", "points", "last_step"]
    list_filter = ["host"]
    search_fields = ["key"]
    list_select_related = ["run", "host"]

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    # The confirmation page would list every point of the series.
    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False
