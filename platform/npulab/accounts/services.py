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


class TokenOutlivesParent(ValueError):
    """A token asked for that would expire after the token making it, or never."""


class TokenExceedsParent(ValueError):
    """A token asked for with a scope the token making it lacks."""


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
    parent: ApiToken | None = None,
) -> tuple[ApiToken, str]:
    """A new token for ``user``; the plain token is returned here and never again.

    ``scopes`` defaults to read and submit; ``expires`` None means never. A token made by
    another (``parent``) has none of the scopes its parent lacks and expires no later:
    TokenExceedsParent, TokenOutlivesParent.
    """
    chosen = clean_scopes(DEFAULT_SCOPES if scopes is None else scopes)
    if parent is not None:
        missing = sorted(set(chosen) - set(parent.scopes))
        if missing:
            raise TokenExceedsParent(
                f"This token may only make tokens within its own scopes; it lacks "
                f"{', '.join(missing)}."
            )
        if parent.expires is not None and (expires is None or expires > parent.expires):
            raise TokenOutlivesParent(
                f"This token expires at {parent.expires.isoformat(timespec='seconds')}; a "
                "token it makes may not outlive it."
            )
    plain = tokens.generate(tokens.USER_TOKEN_PREFIX)
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user,
            name=name,
            display=plain[: tokens.DISPLAY_CHARS],
            digest=tokens.digest(plain),
            scopes=chosen,
            expires=expires,
            parent=parent,
        )
        # The display (its first characters) names it; the token itself is never logged.
        record(
            actions.TOKEN_CREATE,
            target_type=AUDIT_TOKEN,
            target_id=token.pk,
            target_label=f"{token.display}… {name}".strip(),
            user=user,
            data={
                "scopes": token.scopes,
                "expires": expires.isoformat() if expires else None,
                "parent": f"{parent.display}…" if parent is not None else None,
            },
        )
    return token, plain


def do_revoke_api_token(token: ApiToken, by: AbstractBaseUser | None = None) -> ApiToken:
    """Refuse ``token`` from now on, and every token it made (theirs too); revoking it
    again keeps the first time. Each revocation is in the audit log, a made one's with
    the token whose revocation took it along."""
    with transaction.atomic():
        now = timezone.now()
        pending: list[tuple[ApiToken, ApiToken | None]] = [(token, None)]
        while pending:
            current, cause = pending.pop()
            # Only while unrevoked: two revocations at once keep the first time.
            revoked = ApiToken.objects.filter(pk=current.pk, revoked__isnull=True).update(
                revoked=now
            )
            if revoked:
                record(
                    actions.TOKEN_REVOKE,
                    target_type=AUDIT_TOKEN,
                    target_id=current.pk,
                    target_label=f"{current.display}… {current.name}".strip(),
                    user=by,
                    data={"with": f"{cause.display}…"} if cause is not None else None,
                )
            pending += [(child, current) for child in current.children.all()]
    token.refresh_from_db(fields=["revoked"])
    return token
