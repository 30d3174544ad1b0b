"""/api/v1/: the user API (router) and the host workers' agent API (``npulab.agent.urls``)."""

from django.urls import include, path

from npulab import extensions
from npulab.accounts.api.views import ApiTokenViewSet
from npulab.core.converters import IdRouter
from npulab.health.api.views import (
    AuditEntryListView,
    HostDeviceClearView,
    HostDrainView,
    HostHealthView,
    HostUndrainView,
)
from npulab.hosts.api.views import HostViewSet
from npulab.projects.api.views import PoolViewSet, ProjectMemberView, ProjectViewSet
from npulab.review.api.views import UpgradeReviewView
from npulab.runs.api.artifacts import ArtifactDownloadView, RunArtifactListView
from npulab.runs.api.compare import RunCompareView
from npulab.runs.api.kinds import KindViewSet
from npulab.runs.api.views import RunViewSet
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
    # The routes of the run kinds' and the capabilities' apps (coverage, checkpoints ...).
    *extensions.api_urlpatterns(),
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
