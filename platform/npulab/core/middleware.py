"""What every response carries for the browser's protection, and whom the request came through.

``TrustedProxyMiddleware`` runs first: the forwarding headers are believed only from the
proxies the settings name, so a client cannot claim TLS or another address by writing them
itself. ``SecurityHeadersMiddleware`` adds the Content-Security-Policy and marks the session
and CSRF cookies ``Secure`` whenever the request came over TLS.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_FORWARDED = ("HTTP_X_FORWARDED_FOR", "HTTP_X_FORWARDED_PROTO", "HTTP_X_FORWARDED_HOST")


def networks(entries: Iterable[str]) -> tuple[Network, ...]:
    """Addresses and networks (``10.0.0.0/8``) as networks; ImproperlyConfigured on a bad one."""
    found = []
    for entry in entries:
        try:
            found.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ImproperlyConfigured(
                f"NPULAB_TRUSTED_PROXIES: {entry!r} is not an address or network"
            ) from None
    return tuple(found)


def _within(address: str, trusted: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in trusted)


def client_address(remote: str, forwarded_for: str, trusted: tuple[Network, ...]) -> str:
    """The client's address: the last hop in X-Forwarded-For that is not a trusted proxy.

    Each proxy appends the address it was called from, so the entries to the right of
    the first untrusted one were written by proxies we trust, and those to its left by
    the client, who may write anything.
    """
    hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
    address = remote
    for hop in reversed(hops):
        if not _within(address, trusted):
            break
        address = hop
    return address


class TrustedProxyMiddleware:
    """Forwarding headers from a trusted proxy are applied; from anyone else, dropped."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.trusted = networks(settings.NPULAB["TRUSTED_PROXIES"])

    def __call__(self, request: HttpRequest) -> HttpResponse:
        meta = request.META
        remote = meta.get("REMOTE_ADDR", "")
        if self.trusted and _within(remote, self.trusted):
            forwarded = meta.get("HTTP_X_FORWARDED_FOR", "")
            if forwarded:
                meta["REMOTE_ADDR"] = client_address(remote, forwarded, self.trusted)
        else:
            # Django's SECURE_PROXY_SSL_HEADER would believe anyone's X-Forwarded-Proto.
            for header in _FORWARDED:
                meta.pop(header, None)
        return self.get_response(request)


class SecurityHeadersMiddleware:
    """The Content-Security-Policy on every response; Secure cookies on every TLS request."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.policy = settings.NPULAB["CONTENT_SECURITY_POLICY"]
        self.cookies = (settings.SESSION_COOKIE_NAME, settings.CSRF_COOKIE_NAME)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if self.policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = self.policy
        if request.is_secure():
            for name in self.cookies:
                if name in response.cookies:
                    response.cookies[name]["secure"] = True
        return response
