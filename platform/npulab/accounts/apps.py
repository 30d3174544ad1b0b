from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "npulab.accounts"
    label = "accounts"
    verbose_name = "Accounts and API tokens"

    def ready(self) -> None:
        from npulab.accounts import schema  # noqa: F401 - registers the OpenAPI extension
