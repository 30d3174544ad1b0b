"""Keep secrets out of anything npulab stores or shows."""

from __future__ import annotations

import re
from typing import Mapping

REDACTED = "<redacted>"
# Matched anywhere in the name: over-redacting a harmless variable costs
# little, leaking a credential into a snapshot or a log costs a lot.
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|PRIVATE|AUTH", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """True when an environment variable's name suggests it holds a secret."""
    return bool(_SECRET_NAME.search(name))


# The password of user:password@ in a URL (postgres://app:pw@db/x, https://u:token@host):
# it is a credential whatever the variable or the log line is called.
_URL_PASSWORD = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^:/?#@\s]*:)(?P<password>[^@/?#\s]+)(?=@)"
)


def redact_text(text: str) -> str:
    """``text`` with the passwords of URLs in it replaced."""
    return _URL_PASSWORD.sub(lambda match: match["head"] + REDACTED, text)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` with the values of secret-looking variables replaced, and the
    passwords of URLs in the others (``DB_URL=postgres://app:pw@db/app``)."""
    return {
        key: (REDACTED if is_secret_name(key) else redact_text(value)) for key, value in env.items()
    }
