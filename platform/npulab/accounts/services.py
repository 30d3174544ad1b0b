"""Write paths for accounts: issuing and revoking tokens."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from npulab.accounts import tokens
from npulab.accounts.models import DEFAULT_SCOPES, ApiToken, Scope
from npulab.audit import actions
from npulab.audit.services import record

# How tokens are named as the targets of audit entries.
AUDIT_TOKEN = "token"  # noqa: S105 - a kind of object, not a secret


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
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user,
            name=name,
            display=plain[: tokens.DISPLAY_CHARS],
            digest=tokens.digest(plain),
            scopes=clean_scopes(DEFAULT_SCOPES if scopes is None else scopes),
            expires=expires,
        )
        # The display (its first characters) names it; the token itself is never logged.
        record(
            actions.TOKEN_CREATE,
            target_type=AUDIT_TOKEN,
            target_id=token.pk,
            target_label=f"{token.display}… {name}".strip(),
            user=user,
            data={"scopes": token.scopes, "expires": expires.isoformat() if expires else None},
        )
    return token, plain


def do_revoke_api_token(token: ApiToken, by: AbstractBaseUser | None = None) -> ApiToken:
    """Refuse ``token`` from now on; revoking it again keeps the first time."""
    if token.revoked is None:
        with transaction.atomic():
            token.revoked = timezone.now()
            # Only while unrevoked: two revocations at once keep the first time.
            revoked = ApiToken.objects.filter(pk=token.pk, revoked__isnull=True).update(
                revoked=token.revoked
            )
            if revoked:
                record(
                    actions.TOKEN_REVOKE,
                    target_type=AUDIT_TOKEN,
                    target_id=token.pk,
                    target_label=f"{token.display}… {token.name}".strip(),
                    user=by,
                )
        token.refresh_from_db(fields=["revoked"])
    return token
