"""/api/v1/: the user API (router) and the host workers' agent API (``npulab.agent.urls``)."""

from django.urls import include, path

from npulab.accounts.api.views import ApiTokenViewSet
from npulab.artifacts.api.views import ArtifactDownloadView, RunArtifactListView
from npulab.core.converters import IdRouter
from npulab.coverage.api.views import CoverageCompareView, CoverageSummaryView, OpResultListView
from npulab.hosts.api.views import HostViewSet
from npulab.review.api.views import UpgradeReviewView
from npulab.runs.api.compare import RunCompareView
from npulab.runs.api.kinds import KindViewSet
from npulab.runs.api.views import CheckpointFileDownloadView, CheckpointPinView, RunViewSet
from npulab.snapshots.api.views import HostHistoryView, HostSnapshotRequestView, SnapshotViewSet

app_name = "api"

router = IdRouter()
router.register("runs", RunViewSet, basename="run")
router.register("hosts", HostViewSet, basename="host")
router.register("snapshots", SnapshotViewSet, basename="snapshot")
router.register("kinds", KindViewSet, basename="kind")
router.register("tokens", ApiTokenViewSet, basename="token")

urlpatterns = [
    # Before the router's runs/<pk>/, which would take "compare" for an id.
    path("runs/compare/", RunCompareView.as_view(), name="run-compare"),
    *router.urls,
    path(
        "runs/<id:run_id>/checkpoints/<step:step>/download/",
        CheckpointFileDownloadView.as_view(),
        name="checkpoint-download",
    ),
    path(
        "runs/<id:run_id>/checkpoints/<step:step>/pin/",
        CheckpointPinView.as_view(),
        name="checkpoint-pin",
    ),
    path("runs/<id:run_id>/artifacts/", RunArtifactListView.as_view(), name="run-artifacts"),
    path(
        "runs/<id:run_id>/artifacts/<id:artifact_id>/download/",
        ArtifactDownloadView.as_view(),
        name="artifact-download",
    ),
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
    path("hosts/<name:name>/history/", HostHistoryView.as_view(), name="host-history"),
    path(
        "hosts/<name:name>/snapshot-request/",
        HostSnapshotRequestView.as_view(),
        name="host-snapshot-request",
    ),
    path(
        "hosts/<name:name>/upgrade-review/", UpgradeReviewView.as_view(), name="host-upgrade-review"
    ),
    path("agent/", include("npulab.agent.urls")),
]
