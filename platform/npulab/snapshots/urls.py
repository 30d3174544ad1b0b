from django.urls import path

from npulab.snapshots import views

app_name = "snapshots"
urlpatterns = [
    path("diff/", views.snapshot_diff, name="snapshot_diff"),
    path("<id:pk>/", views.snapshot_detail, name="snapshot_detail"),
    path("<id:pk>/known-good/", views.snapshot_known_good, name="snapshot_known_good"),
]

# Host pages: ``npulab.urls`` mounts them in the ``hosts`` namespace.
host_urlpatterns = [
    path(
        "<name:name>/snapshot-request/",
        views.host_snapshot_request,
        name="host_snapshot_request",
    ),
    path("<name:name>/history/", views.host_history, name="host_history"),
]
