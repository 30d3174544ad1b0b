"""Bearer tokens: random, prefixed by what they unlock, stored only as a digest."""

from __future__ import annotations

import hashlib
import secrets

USER_TOKEN_PREFIX = "npl_"  # noqa: S105 - a prefix, not a secret
HOST_TOKEN_PREFIX = "nph_"  # noqa: S105 - a prefix, not a secret
# Enough of a token to tell tokens apart in a list, far too little to use one.
DISPLAY_CHARS = 10


def generate(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
