"""The parity kind's routes in the user API (joined to ``api`` by npulab.extensions)."""

from django.urls import path

from npulab.parity.api.views import LossParityView, ParityView

urlpatterns = [
    path("runs/<id:run_id>/parity/", ParityView.as_view(), name="run-parity"),
    path("runs/<id:run_id>/parity/loss/", LossParityView.as_view(), name="run-parity-loss"),
]
