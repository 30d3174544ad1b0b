"""The user API's rate limit: per token, or per user for browser sessions.

Host tokens are not limited here: a host worker sends an event batch per
second per run, and the agent endpoints guard themselves (batch size, body
size). The counts live in Django's cache (``CACHES``), which is per process
unless NPULAB_CACHE_URL points at Redis.
"""

from __future__ import annotations

from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle

from npulab.accounts.models import ApiToken


class TokenRateThrottle(SimpleRateThrottle):
    """NPULAB_API_RATE requests per period; the excess gets 429 with Retry-After."""

    scope = "api"

    def get_rate(self) -> tuple[int, int]:  # type: ignore[override]
        # Read per request, so a test's settings override takes effect.
        return settings.NPULAB["API_RATE"]

    def parse_rate(self, rate: tuple[int, int]) -> tuple[int, int]:  # type: ignore[override]
        # Parsed strictly at start-up (npulab.conf.Env.rate): (requests, seconds).
        return rate

    def get_cache_key(self, request, view) -> str | None:
        if isinstance(request.auth, ApiToken):
            ident = f"token-{request.auth.pk}"
        elif request.user and request.user.is_authenticated:
            ident = f"user-{request.user.pk}"
        elif request.auth is not None:
            return None  # a host token (the agent app's)
        else:
            ident = f"anon-{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}
