from django.urls import path

from npulab.hosts import views
from npulab.snapshots import views as snapshot_views

app_name = "hosts"
urlpatterns = [
    path("", views.host_list, name="host_list"),
    path("<str:name>/", views.host_detail, name="host_detail"),
    path(
        "<str:name>/snapshot-request/",
        snapshot_views.host_snapshot_request,
        name="host_snapshot_request",
    ),
    path("<str:name>/upgrade-review/", snapshot_views.upgrade_review, name="host_upgrade_review"),
    path("<str:name>/history/", snapshot_views.host_history, name="host_history"),
]
