"""/api/v1/agent/: every endpoint a host worker calls with its host token.

Included by ``npulab.api_urls`` without a namespace of its own, so the names
stay ``api:agent-…``; one block per module of ``agent/api/``.
"""

from django.urls import path

from npulab.agent.api.artifacts import UploadCreateView, UploadView
from npulab.agent.api.checkpoints import CheckpointFileView
from npulab.agent.api.handoff import HandoffFileView
from npulab.agent.api.hosts import HeartbeatView, RegisterView
from npulab.agent.api.runs import ClaimView, EventsView, FinishView
from npulab.agent.api.snapshots import SnapshotUploadView
from npulab.agent.api.telemetry import TelemetryView

# The most frequent first: a URL is matched against each pattern in turn.
urlpatterns = [
    path("runs/<id:run_id>/events/", EventsView.as_view(), name="agent-events"),
    path("heartbeat/", HeartbeatView.as_view(), name="agent-heartbeat"),
    path("telemetry/", TelemetryView.as_view(), name="agent-telemetry"),
    path("snapshots/", SnapshotUploadView.as_view(), name="agent-snapshots"),
    path("register/", RegisterView.as_view(), name="agent-register"),
    path("runs/<id:run_id>/claim/", ClaimView.as_view(), name="agent-claim"),
    path("runs/<id:run_id>/finish/", FinishView.as_view(), name="agent-finish"),
    path(
        "runs/<id:run_id>/checkpoints/<step:step>/",
        CheckpointFileView.as_view(),
        name="agent-checkpoint",
    ),
    path("runs/<id:run_id>/handoff/<id:file_id>/", HandoffFileView.as_view(), name="agent-handoff"),
    path("runs/<id:run_id>/uploads/", UploadCreateView.as_view(), name="agent-uploads"),
    path(
        "runs/<id:run_id>/uploads/<uuid:upload_id>/",
        UploadView.as_view(),
        name="agent-upload",
    ),
]
