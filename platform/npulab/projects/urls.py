from django.urls import path

from npulab.projects import views

app_name = "projects"
urlpatterns = [
    path("", views.project_list, name="project_list"),
    path("new/", views.project_create, name="project_create"),
    path("<name:slug>/", views.project_detail, name="project_detail"),
    path("<name:slug>/members/", views.member_add, name="member_add"),
    path("<name:slug>/members/<name:username>/", views.member_change, name="member_change"),
]
