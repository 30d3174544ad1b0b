from django.urls import re_path

from npulab.mlflow import views

app_name = "mlflow"
urlpatterns = [
    re_path(r"^(?P<path>.*)$", views.tracking_api, name="api"),
]
