from django.urls import path

from npulab.runs import views

app_name = "runs"
urlpatterns = [
    path("", views.run_list, name="run_list"),
    path("new/", views.run_submit, name="run_submit"),
    path("compare/", views.run_compare, name="run_compare"),
    path("<int:pk>/", views.run_detail, name="run_detail"),
    path("<int:pk>/log/", views.run_log, name="run_log"),
    path("<int:pk>/log.txt", views.run_log_text, name="run_log_text"),
    path("<int:pk>/cancel/", views.run_cancel, name="run_cancel"),
    path("<int:pk>/restart/", views.run_restart, name="run_restart"),
    path("<int:pk>/checkpoints/<int:step>/pin/", views.checkpoint_pin, name="checkpoint_pin"),
]
