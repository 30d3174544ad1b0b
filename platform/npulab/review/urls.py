"""The upgrade review's page, one of the host pages.

``npulab.urls`` mounts ``host_urlpatterns`` in the ``hosts`` namespace, so its
name stays ``hosts:host_upgrade_review``.
"""

from django.urls import path

from npulab.review import views

host_urlpatterns = [
    path("<name:name>/upgrade-review/", views.upgrade_review, name="host_upgrade_review"),
]
