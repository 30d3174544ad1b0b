"""The coverage kind's routes in the user API (joined to ``api`` by npulab.extensions)."""

from django.urls import path

from npulab.coverage.api.views import CoverageCompareView, CoverageSummaryView, OpResultListView

urlpatterns = [
    path("runs/<id:run_id>/coverage/", OpResultListView.as_view(), name="run-coverage"),
    path(
        "runs/<id:run_id>/coverage/summary/",
        CoverageSummaryView.as_view(),
        name="run-coverage-summary",
    ),
    path(
        "runs/<id:run_id>/coverage/compare/",
        CoverageCompareView.as_view(),
        name="run-coverage-compare",
    ),
]
