"""/api/v1/: the user API (router) and the host workers' agent API (``npulab.agent.urls``)."""

from django.urls import include, path

from npulab.accounts.api.views import ApiTokenViewSet
from npulab.core.converters import IdRouter
from npulab.coverage.api.views import CoverageCompareView, CoverageSummaryView, OpResultListView
from npulab.health.api.views import (
    AuditEntryListView,
    HostDeviceClearView,
    HostDrainView,
    HostHealthView,
    HostUndrainView,
)
from npulab.hosts.api.views import HostViewSet
from npulab.parity.api.views import LossParityView, ParityView
from npulab.profiles.api.timeline import ProfileTimelineView
from npulab.profiles.api.views import (
    ProfileDetailView,
    ProfileDownloadView,
    ProfileSummariseView,
    RunProfileListView,
)
from npulab.projects.api.views import PoolViewSet, ProjectMemberView, ProjectViewSet
from npulab.review.api.views import UpgradeReviewView
from npulab.runs.api.artifacts import ArtifactDownloadView, RunArtifactListView
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
router.register("projects", ProjectViewSet, basename="project")
router.register("pools", PoolViewSet, basename="pool")

urlpatterns = [
    # The host workers' requests, most of them, are matched first (npulab.urls).
    path("agent/", include("npulab.agent.urls")),
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
    path(
        "projects/<name:slug>/members/<name:username>/",
        ProjectMemberView.as_view(),
        name="project-member",
    ),
    path("runs/<id:run_id>/artifacts/", RunArtifactListView.as_view(), name="run-artifacts"),
    path(
        "runs/<id:run_id>/artifacts/<id:artifact_id>/download/",
        ArtifactDownloadView.as_view(),
        name="artifact-download",
    ),
    path("runs/<id:run_id>/profiles/", RunProfileListView.as_view(), name="run-profiles"),
    path("profiles/<id:pk>/", ProfileDetailView.as_view(), name="profile-detail"),
    path("profiles/<id:pk>/download/", ProfileDownloadView.as_view(), name="profile-download"),
    path("profiles/<id:pk>/timeline/", ProfileTimelineView.as_view(), name="profile-timeline"),
    path("profiles/<id:pk>/summarise/", ProfileSummariseView.as_view(), name="profile-summarise"),
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
    path("runs/<id:run_id>/parity/", ParityView.as_view(), name="run-parity"),
    path("runs/<id:run_id>/parity/loss/", LossParityView.as_view(), name="run-parity-loss"),
    path("hosts/<name:name>/history/", HostHistoryView.as_view(), name="host-history"),
    path("hosts/<name:name>/health/", HostHealthView.as_view(), name="host-health"),
    path("hosts/<name:name>/drain/", HostDrainView.as_view(), name="host-drain"),
    path("hosts/<name:name>/undrain/", HostUndrainView.as_view(), name="host-undrain"),
    path(
        "hosts/<name:name>/devices/<step:index>/clear/",
        HostDeviceClearView.as_view(),
        name="host-device-clear",
    ),
    path("audit/", AuditEntryListView.as_view(), name="audit-list"),
    path(
        "hosts/<name:name>/snapshot-request/",
        HostSnapshotRequestView.as_view(),
        name="host-snapshot-request",
    ),
    path(
        "hosts/<name:name>/upgrade-review/", UpgradeReviewView.as_view(), name="host-upgrade-review"
    ),
]
