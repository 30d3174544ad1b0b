"""The errors services raise that every API answers the same way (see ``core.api``).

They live here, below the apps that raise them, so the exception handler
needs no app.
"""

from __future__ import annotations

from typing import Any


class SubmissionInvalid(Exception):
    """A submission was refused; ``errors`` maps each field to why."""

    def __init__(self, errors: dict[str, str]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{key}: {msg}" for key, msg in errors.items()))


class Conflict(Exception):
    """A request that does not fit the run's current state (HTTP 409)."""

    def __init__(self, detail: str, **extra: Any) -> None:
        self.detail = detail
        self.extra = extra
        super().__init__(detail)


class InvalidTransition(Exception):
    """A run was asked to move to a status its current status cannot reach."""
