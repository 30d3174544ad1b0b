"""Failed sign-ins and unknown tokens, counted per client address, so guessing is slowed.

NPULAB_AUTH_FAILURE_RATE failures (default 20 a minute) from one address,
and every attempt from it is refused until the period ends, a right one
too: that is what makes guessing slow. Counts live in Django's cache (per
process unless NPULAB_CACHE_URL points at Redis), in fixed windows.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest

_KEY = "npulab-auth-failures:{address}:{window}"


def _address(request: HttpRequest) -> str:
    # The peer address: a proxy's X-Forwarded-For is the client's to write.
    return request.META.get("REMOTE_ADDR", "") or "unknown"


def _window(now: float) -> tuple[int, int, int]:
    """(failures allowed, window number, seconds left in it)."""
    limit, period = settings.NPULAB["AUTH_FAILURE_RATE"]
    return limit, int(now // period), period - int(now % period)


def retry_after(request: HttpRequest) -> int | None:
    """Seconds until the address may try again; None while it is under the limit."""
    limit, window, left = _window(time.time())
    failures = cache.get(_KEY.format(address=_address(request), window=window), 0)
    return left if failures >= limit else None


def record_failure(request: HttpRequest) -> None:
    _, window, left = _window(time.time())
    key = _KEY.format(address=_address(request), window=window)
    cache.add(key, 0, timeout=left + 1)
    try:
        cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, timeout=left + 1)
