from django.urls import path

from npulab.core import views

app_name = "core"
urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("healthz", views.healthz, name="healthz"),
]
