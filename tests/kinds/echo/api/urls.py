from django.urls import path

from tests.kinds.echo.views import WordListView

urlpatterns = [path("runs/<id:run_id>/echo/", WordListView.as_view(), name="run-echo")]
