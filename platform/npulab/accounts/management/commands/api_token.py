from __future__ import annotations

import argparse
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from npulab.accounts.models import DEFAULT_SCOPES
from npulab.accounts.services import ScopesInvalid, clean_scopes, do_issue_api_token


def _positive(raw: str) -> int:
    if not raw.isdigit() or int(raw) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of days, at least 1: {raw!r}")
    return int(raw)


class Command(BaseCommand):
    help = "Print a new REST API token for USERNAME (shown once; only its digest is stored)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="what the token is for, e.g. 'ci'")
        parser.add_argument(
            "--scopes",
            default=",".join(DEFAULT_SCOPES),
            help="comma-separated, of read, submit and admin (default: %(default)s)",
        )
        parser.add_argument(
            "--expires-days",
            type=_positive,
            default=None,
            metavar="N",
            help="the token stops working after N days (default: never)",
        )

    def handle(
        self, *args, username: str, name: str, scopes: str, expires_days: int | None, **options
    ) -> None:
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"no active user {username!r}")
        try:
            chosen = clean_scopes(scopes.split(","))
        except ScopesInvalid as exc:
            raise CommandError(f"--scopes: {exc}") from None
        expires = timezone.now() + timedelta(days=expires_days) if expires_days else None
        _, plain = do_issue_api_token(user, name=name, scopes=chosen, expires=expires)
        self.stdout.write(plain)
