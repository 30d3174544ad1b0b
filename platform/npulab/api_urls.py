"""/api/v1/: the user API (router) and the host workers' agent API."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from npulab.hosts.api.views import HeartbeatView, HostViewSet, RegisterView
from npulab.runs.api.agent import CheckpointFileView, ClaimView, EventsView, FinishView
from npulab.runs.api.views import CheckpointFileDownloadView, CheckpointPinView, RunViewSet
from npulab.snapshots.api.agent import SnapshotUploadView
from npulab.snapshots.api.views import (
    HostHistoryView,
    HostSnapshotRequestView,
    SnapshotViewSet,
    UpgradeReviewView,
)

app_name = "api"

router = DefaultRouter()
router.register("runs", RunViewSet, basename="run")
router.register("hosts", HostViewSet, basename="host")
router.register("snapshots", SnapshotViewSet, basename="snapshot")

urlpatterns = [
    *router.urls,
    path(
        "runs/<int:run_id>/checkpoints/<int:step>/download/",
        CheckpointFileDownloadView.as_view(),
        name="checkpoint-download",
    ),
    path(
        "runs/<int:run_id>/checkpoints/<int:step>/pin/",
        CheckpointPinView.as_view(),
        name="checkpoint-pin",
    ),
    path("hosts/<str:name>/history/", HostHistoryView.as_view(), name="host-history"),
    path(
        "hosts/<str:name>/snapshot-request/",
        HostSnapshotRequestView.as_view(),
        name="host-snapshot-request",
    ),
    path(
        "hosts/<str:name>/upgrade-review/", UpgradeReviewView.as_view(), name="host-upgrade-review"
    ),
    path("agent/snapshots/", SnapshotUploadView.as_view(), name="agent-snapshots"),
    path("agent/register/", RegisterView.as_view(), name="agent-register"),
    path("agent/heartbeat/", HeartbeatView.as_view(), name="agent-heartbeat"),
    path("agent/runs/<int:run_id>/claim/", ClaimView.as_view(), name="agent-claim"),
    path("agent/runs/<int:run_id>/events/", EventsView.as_view(), name="agent-events"),
    path("agent/runs/<int:run_id>/finish/", FinishView.as_view(), name="agent-finish"),
    path(
        "agent/runs/<int:run_id>/checkpoints/<int:step>/",
        CheckpointFileView.as_view(),
        name="agent-checkpoint",
    ),
]
