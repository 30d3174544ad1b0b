from django.urls import path

from npulab.snapshots import views

app_name = "snapshots"
urlpatterns = [
    path("diff/", views.snapshot_diff, name="snapshot_diff"),
    path("<int:pk>/", views.snapshot_detail, name="snapshot_detail"),
    path("<int:pk>/known-good/", views.snapshot_known_good, name="snapshot_known_good"),
]
