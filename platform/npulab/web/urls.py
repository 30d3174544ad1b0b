from django.urls import path

from npulab.web import views

app_name = "web"
urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("healthz", views.healthz, name="healthz"),
]
