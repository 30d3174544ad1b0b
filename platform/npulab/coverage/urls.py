from django.urls import path

from npulab.coverage import views

app_name = "coverage"
urlpatterns = [
    path("<id:pk>/coverage/", views.matrix_page, name="matrix"),
    path("<id:pk>/coverage/cell/", views.cell_page, name="cell"),
    path("<id:pk>/coverage/compare/", views.compare_page, name="compare"),
]
