"""The checkpoints capability's pages, under /runs/ (mounted by npulab.extensions)."""

from django.urls import path

from npulab.checkpoints import views

app_name = "checkpoints"
urlpatterns = [
    path("<id:pk>/checkpoints/<step:step>/pin/", views.checkpoint_pin, name="checkpoint_pin"),
]
