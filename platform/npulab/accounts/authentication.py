"""``Authorization: Token <key>`` for users (npl_…) and host workers (nph_…)."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.models import AnonymousUser
from django.utils import timezone
from rest_framework import authentication, exceptions

from npulab.accounts import tokens
from npulab.accounts.models import ApiToken
from npulab.hosts.models import Host

# Recording every use would turn each read into a write.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class TokenAuthentication(authentication.BaseAuthentication):
    """A user token authenticates its user; a host token authenticates as its Host.

    For a host token ``request.user`` stays anonymous and ``request.auth`` is
    the Host, so user endpoints refuse it and agent endpoints accept only it.
    """

    keywords = (b"token", b"bearer")

    def authenticate(self, request):
        parts = authentication.get_authorization_header(request).split()
        if not parts or parts[0].lower() not in self.keywords:
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Token header must be `Token <key>`.")
        try:
            key = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Token contains invalid characters.") from None
        if key.startswith(tokens.HOST_TOKEN_PREFIX):
            return self._host(key)
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
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        now = timezone.now()
        if token.last_used is None or now - token.last_used > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used=now)
        return token.user, token

    def _host(self, key: str) -> tuple:
        host = Host.objects.filter(token_digest=tokens.digest(key)).first()
        if host is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked host token.")
        return AnonymousUser(), host
