"""The profiling capability's routes in the user API (joined to ``api`` by
npulab.extensions)."""

from django.urls import path

from npulab.profiles.api.timeline import ProfileTimelineView
from npulab.profiles.api.views import (
    ProfileDetailView,
    ProfileDownloadView,
    ProfileSummariseView,
    RunProfileListView,
)

urlpatterns = [
    path("runs/<id:run_id>/profiles/", RunProfileListView.as_view(), name="run-profiles"),
    path("profiles/<id:pk>/", ProfileDetailView.as_view(), name="profile-detail"),
    path("profiles/<id:pk>/download/", ProfileDownloadView.as_view(), name="profile-download"),
    path("profiles/<id:pk>/timeline/", ProfileTimelineView.as_view(), name="profile-timeline"),
    path("profiles/<id:pk>/summarise/", ProfileSummariseView.as_view(), name="profile-summarise"),
]
