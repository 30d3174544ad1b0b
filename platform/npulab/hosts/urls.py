"""The host pages of this app; ``npulab.urls`` adds those of the apps above to the namespace."""

from django.urls import path

from npulab.hosts import views

app_name = "hosts"
urlpatterns = [
    path("", views.host_list, name="host_list"),
    path("<name:name>/", views.host_detail, name="host_detail"),
    path("<name:name>/accept-devices/", views.host_accept_devices, name="host_accept_devices"),
]
