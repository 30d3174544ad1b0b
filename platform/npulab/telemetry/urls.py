"""Telemetry pages under a host's URL; ``npulab.urls`` adds them to the hosts namespace."""

from django.urls import path

from npulab.telemetry import views

host_urlpatterns = [
    path("<name:name>/telemetry/", views.host_telemetry, name="host_telemetry"),
]
