"""``Authorization: Token nph_…``: a host worker authenticates as its Host."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser
from rest_framework import authentication, exceptions

from npulab.accounts import tokens
from npulab.accounts.authentication import TokenAuthentication, token_key
from npulab.core.sql import fetch_instance
from npulab.hosts.models import Host


class HostTokenAuthentication(authentication.BaseAuthentication):
    """A host token authenticates as its Host; every other header is left to the others.

    ``request.user`` stays anonymous and ``request.auth`` is the Host, so user
    endpoints refuse it and agent endpoints accept only it.
    """

    def authenticate(self, request):
        key = token_key(request)
        if key is None or not key.startswith(tokens.HOST_TOKEN_PREFIX):
            return None
        # Never the sign-in lockout: a flood of failed sign-ins from this address (the
        # platform's own, for the local worker) must not cut a host off.
        host = _host_of(tokens.digest(key))
        if host is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked host token.")
        return AnonymousUser(), host

    def authenticate_header(self, request) -> str:
        return "Token"


def _host_of(digest: str) -> Host | None:
    """The host with this token digest, in plain SQL: every request of every host worker
    asks, and the ORM's query cost twice what the database's did (docs/benchmarks.md)."""
    return fetch_instance(Host, _HOST_BY_DIGEST, [digest])


_HOST_BY_DIGEST = "SELECT {columns} FROM {table} WHERE token_digest = %s"


# What agent endpoints authenticate with: a user token is recognised (and then
# refused with 403 by IsHostAgent) rather than ignored (401).
AGENT_AUTHENTICATION = [TokenAuthentication, HostTokenAuthentication]
