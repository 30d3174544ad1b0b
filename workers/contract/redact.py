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


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` with the values of secret-looking variables replaced."""
    return {key: (REDACTED if is_secret_name(key) else value) for key, value in env.items()}
