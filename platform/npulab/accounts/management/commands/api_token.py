from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from npulab.accounts.services import do_issue_api_token


class Command(BaseCommand):
    help = "Print a new REST API token for USERNAME (shown once; only its digest is stored)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="what the token is for, e.g. 'ci'")

    def handle(self, *args, username: str, name: str, **options) -> None:
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"no active user {username!r}")
        _, plain = do_issue_api_token(user, name=name)
        self.stdout.write(plain)
