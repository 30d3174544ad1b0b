from django.urls import path

from npulab.profiles import run_panel, views

app_name = "profiles"
urlpatterns = [
    path("compare/", views.profile_compare, name="compare"),
    path("<id:pk>/timeline/", views.timeline_page, name="timeline"),
    path("<id:pk>/timeline/window/", views.timeline_window, name="timeline_window"),
    path("<id:pk>/timeline/search/", views.timeline_search, name="timeline_search"),
    path("<id:pk>/timeline/events/<id:event_id>/", views.timeline_event, name="timeline_event"),
    path("runs/<id:run_id>/", run_panel.run_profiles_panel, name="run_panel"),
    path("runs/<id:run_id>/import/", run_panel.run_profile_import, name="run_import"),
]
