from django.urls import path

from npulab.web import metrics, views

app_name = "web"
urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("healthz", views.healthz, name="healthz"),
    path("metrics", metrics.metrics, name="metrics"),
]
