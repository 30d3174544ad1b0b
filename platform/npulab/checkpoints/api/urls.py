"""The checkpoints capability's routes in the user API (joined to the ``api`` namespace by
npulab.extensions)."""

from django.urls import path

from npulab.checkpoints.api.views import (
    CheckpointFileDownloadView,
    CheckpointPinView,
    RunCheckpointListView,
)

urlpatterns = [
    path("runs/<id:pk>/checkpoints/", RunCheckpointListView.as_view(), name="run-checkpoints"),
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
]
