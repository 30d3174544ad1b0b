from django.urls import path

from npulab.accounts import views

app_name = "accounts"
urlpatterns = [
    path("tokens/", views.token_list, name="token_list"),
    path("tokens/<id:pk>/revoke/", views.token_revoke, name="token_revoke"),
    path("users/", views.user_list, name="user_list"),
    path("users/<id:pk>/", views.user_change, name="user_change"),
]
