"""Write paths for accounts: issuing tokens."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser

from npulab.accounts import tokens
from npulab.accounts.models import ApiToken


def do_issue_api_token(user: AbstractBaseUser, name: str = "") -> tuple[ApiToken, str]:
    """A new token for ``user``; the plain token is returned here and never again."""
    plain = tokens.generate(tokens.USER_TOKEN_PREFIX)
    token = ApiToken.objects.create(
        user=user,
        name=name,
        display=plain[: tokens.DISPLAY_CHARS],
        digest=tokens.digest(plain),
    )
    return token, plain
