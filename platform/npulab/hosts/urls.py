from django.urls import path

from npulab.hosts import views

app_name = "hosts"
urlpatterns = [
    path("", views.host_list, name="host_list"),
    path("<str:name>/", views.host_detail, name="host_detail"),
]
