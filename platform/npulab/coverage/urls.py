from django.urls import path

from npulab.coverage import views

app_name = "coverage"
urlpatterns = [
    path("<int:pk>/coverage/", views.matrix_page, name="matrix"),
    path("<int:pk>/coverage/cell/", views.cell_page, name="cell"),
    path("<int:pk>/coverage/compare/", views.compare_page, name="compare"),
]
