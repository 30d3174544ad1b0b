from django.urls import path

from npulab.health import views

# Host pages: ``npulab.urls`` mounts them in the ``hosts`` namespace.
host_urlpatterns = [
    path("<name:name>/drain/", views.host_drain, name="host_drain"),
    path("<name:name>/undrain/", views.host_undrain, name="host_undrain"),
    path(
        "<name:name>/devices/<step:index>/clear/",
        views.host_device_clear,
        name="host_device_clear",
    ),
]
