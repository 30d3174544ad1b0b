from django.urls import path

from tests.kinds.echo import views

app_name = "echo"
urlpatterns = [path("<id:pk>/echo/", views.words_page, name="words")]
