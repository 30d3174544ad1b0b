from django.urls import path

from npulab.runs import views

app_name = "runs"
urlpatterns = [
    path("", views.run_list, name="run_list"),
    path("new/", views.run_submit, name="run_submit"),
    path("compare/", views.run_compare, name="run_compare"),
    path("<id:pk>/", views.run_detail, name="run_detail"),
    path("<id:pk>/log/", views.run_log, name="run_log"),
    path("<id:pk>/log.txt", views.run_log_text, name="run_log_text"),
    path("<id:pk>/bundle/", views.run_bundle, name="run_bundle"),
    path("<id:pk>/cancel/", views.run_cancel, name="run_cancel"),
    path("<id:pk>/restart/", views.run_restart, name="run_restart"),
]
