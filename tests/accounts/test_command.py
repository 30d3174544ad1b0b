"""``manage.py api_token USER``: scopes and expiry on the command line."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from npulab.accounts import tokens
from npulab.accounts.models import ApiToken

pytestmark = pytest.mark.django_db


def issue(*args: str) -> tuple[str, ApiToken]:
    out = StringIO()
    call_command("api_token", *args, stdout=out)
    plain = out.getvalue().strip()
    return plain, ApiToken.objects.get(digest=tokens.digest(plain))


def test_by_default_a_token_reads_and_submits_and_never_expires(owner) -> None:
    plain, token = issue("owner", "--name", "ci")
    assert plain.startswith("npl_")
    assert (token.name, token.scopes, token.expires) == ("ci", ["read", "submit"], None)


def test_scopes_and_expiry_are_chosen_on_the_command_line(owner) -> None:
    _, token = issue("owner", "--scopes", "admin, read", "--expires-days", "7")
    assert token.scopes == ["read", "admin"]
    assert token.expires is not None
    left = token.expires - timezone.now()
    assert timedelta(days=7) - timedelta(minutes=1) < left <= timedelta(days=7)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--scopes", "read,write"], "unknown scope(s) write"),
        (["--scopes", ","], "at least one scope"),
        (["--expires-days", "0"], "at least 1"),
        (["--expires-days", "soon"], "at least 1"),
    ],
)
def test_bad_scopes_or_expiry_are_refused(owner, args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        issue("owner", *args)
    assert ApiToken.objects.count() == 0


def test_an_unknown_user_is_refused(db) -> None:
    with pytest.raises(CommandError, match="no active user 'nobody'"):
        issue("nobody")
