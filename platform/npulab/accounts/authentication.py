"""``Authorization: Token <key>`` for users (npl_…); host tokens (nph_…) are the agent app's."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from django.utils.formats import date_format
from rest_framework import authentication, exceptions

from npulab.accounts import tokens
from npulab.accounts.models import ApiToken
from npulab.core import errors

# Recording every use would turn each read into a write.
LAST_USED_RESOLUTION = timedelta(minutes=1)
KEYWORDS = (b"token", b"bearer")


def token_key(request) -> str | None:
    """The key of a ``Token <key>`` (or ``Bearer <key>``) header; None without one."""
    parts = authentication.get_authorization_header(request).split()
    if not parts or parts[0].lower() not in KEYWORDS:
        return None
    if len(parts) != 2:
        raise exceptions.AuthenticationFailed("Token header must be `Token <key>`.")
    try:
        return parts[1].decode("ascii")
    except UnicodeDecodeError:
        raise exceptions.AuthenticationFailed("Token contains invalid characters.") from None


class TokenAuthentication(authentication.BaseAuthentication):
    """A user token authenticates its user; ``request.auth`` is the ApiToken.

    An expired or revoked token is refused (401) saying which, so a pipeline
    knows to ask for a new one rather than retry. A host token is left to
    ``npulab.agent.authentication.HostTokenAuthentication``, listed after this
    class wherever both kinds are accepted.
    """

    def authenticate(self, request):
        key = token_key(request)
        if key is None or key.startswith(tokens.HOST_TOKEN_PREFIX):
            return None
        # Never the sign-in lockout (npulab.accounts.lockout): a token is no password.
        return self._user(key)

    def authenticate_header(self, request) -> str:
        return "Token"

    def _user(self, key: str) -> tuple:
        token = (
            ApiToken.objects.select_related("user")
            .filter(digest=tokens.digest(key), user__is_active=True)
            .first()
        )
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        now = timezone.now()
        if token.revoked is not None:
            raise exceptions.AuthenticationFailed(
                f"This token ({token.display}…) was revoked on {_when(token.revoked)}.",
                code=errors.TOKEN_REVOKED,
            )
        if token.expires is not None and token.expires <= now:
            raise exceptions.AuthenticationFailed(
                f"This token ({token.display}…) expired on {_when(token.expires)}.",
                code=errors.TOKEN_EXPIRED,
            )
        if token.last_used is None or now - token.last_used > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used=now)
        return token.user, token


def _when(moment) -> str:
    return date_format(timezone.localtime(moment), "Y-m-d H:i T")
