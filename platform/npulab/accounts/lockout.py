"""Failed sign-ins, counted per client address, so guessing a password is slowed.

NPULAB_AUTH_FAILURE_RATE failures (default 20 a minute) from one address, and every
sign-in from it is refused until the period ends, a right one too: that is what makes
guessing slow. Counts live in the database (``SignInFailure``), in fixed windows, so
all web processes and servers share them.

Only the sign-in form counts and is refused. API and host tokens are random and long
(``npulab.accounts.tokens``), nothing to guess at any speed; the API rate limit
applies to them instead, and a host worker is never locked out by someone else's
failed sign-ins from its address.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.http import HttpRequest

from npulab.accounts.models import SignInFailure


def _address(request: HttpRequest) -> str:
    # The peer address: a proxy's X-Forwarded-For is the client's to write.
    return (request.META.get("REMOTE_ADDR", "") or "unknown")[:64]


def _window(now: float) -> tuple[int, int, int]:
    """(failures allowed, window number, seconds left in it)."""
    limit, period = settings.NPULAB["AUTH_FAILURE_RATE"]
    return limit, int(now // period), period - int(now % period)


def retry_after(request: HttpRequest) -> int | None:
    """Seconds until the address may try again; None while it is under the limit."""
    limit, window, left = _window(time.time())
    failures = (
        SignInFailure.objects.filter(address=_address(request), window=window)
        .values_list("count", flat=True)
        .first()
    )
    return left if (failures or 0) >= limit else None


def record_failure(request: HttpRequest) -> None:
    _, window, _ = _window(time.time())
    address = _address(request)
    counted = SignInFailure.objects.filter(address=address, window=window)
    with transaction.atomic():
        if counted.update(count=F("count") + 1):
            return
        try:
            with transaction.atomic():
                SignInFailure.objects.create(address=address, window=window, count=1)
        except IntegrityError:  # another process made the row meanwhile
            counted.update(count=F("count") + 1)
        # Past windows count for nothing; one more row a window is all the table grows.
        SignInFailure.objects.filter(window__lt=window).delete()
