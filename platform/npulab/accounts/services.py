"""Write paths for accounts: issuing and revoking tokens."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from npulab.accounts import tokens
from npulab.accounts.models import DEFAULT_SCOPES, ApiToken, Scope


class ScopesInvalid(ValueError):
    """Scopes asked for that are not read, submit or admin, or none at all."""


def clean_scopes(scopes: Iterable[str]) -> list[str]:
    """``scopes`` in ``Scope`` order, each once; ScopesInvalid names any unknown one."""
    asked = {scope.strip() for scope in scopes if scope.strip()}
    unknown = sorted(asked - set(Scope.values))
    if unknown:
        raise ScopesInvalid(
            f"unknown scope(s) {', '.join(unknown)}; one or more of {', '.join(Scope.values)}"
        )
    if not asked:
        raise ScopesInvalid(f"a token needs at least one scope of {', '.join(Scope.values)}")
    return [scope for scope in Scope.values if scope in asked]


def do_issue_api_token(
    user: AbstractBaseUser,
    name: str = "",
    scopes: Iterable[str] | None = None,
    expires: datetime | None = None,
) -> tuple[ApiToken, str]:
    """A new token for ``user``; the plain token is returned here and never again.

    ``scopes`` defaults to read and submit; ``expires`` None means never.
    """
    plain = tokens.generate(tokens.USER_TOKEN_PREFIX)
    token = ApiToken.objects.create(
        user=user,
        name=name,
        display=plain[: tokens.DISPLAY_CHARS],
        digest=tokens.digest(plain),
        scopes=clean_scopes(DEFAULT_SCOPES if scopes is None else scopes),
        expires=expires,
    )
    return token, plain


def do_revoke_api_token(token: ApiToken) -> ApiToken:
    """Refuse ``token`` from now on; revoking it again keeps the first time."""
    if token.revoked is None:
        token.revoked = timezone.now()
        # Only while unrevoked: two revocations at once keep the first time.
        ApiToken.objects.filter(pk=token.pk, revoked__isnull=True).update(revoked=token.revoked)
        token.refresh_from_db(fields=["revoked"])
    return token
