from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone

from npulab.accounts import tokens


class Scope(models.TextChoices):
    """What a user token may do; a browser session is not scoped."""

    READ = "read", "Read: every GET of the user API"
    SUBMIT = "submit", "Submit: submit, cancel and restart runs, pin checkpoints"
    ADMIN = "admin", "Admin: operator actions (known-good marks, snapshot requests, tokens)"


# What a token gets unless asked otherwise, and what tokens made before scopes kept.
DEFAULT_SCOPES = [Scope.READ.value, Scope.SUBMIT.value]


def default_scopes() -> list[str]:
    return list(DEFAULT_SCOPES)


class ApiToken(models.Model):
    """A user's REST API token. Only its SHA-256 digest is stored; the token is shown once.

    It may do what its ``scopes`` allow until it ``expires`` (never, when
    empty) or is ``revoked``; a revoked token is kept so its list still says so.
    """

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        EXPIRED = "expired", "Expired"
        REVOKED = "revoked", "Revoked"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True)
    display = models.CharField(max_length=tokens.DISPLAY_CHARS + 1)
    digest = models.CharField(max_length=64, unique=True)
    scopes = models.JSONField(default=default_scopes, help_text="Any of read, submit and admin.")
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)
    expires = models.DateTimeField(null=True, blank=True, help_text="Empty: never.")
    revoked = models.DateTimeField(null=True, blank=True)
    # The token that made this one through the API: this one never outlives it, never
    # has a scope it lacks, and is revoked with it.
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"{self.display}… ({self.user})"

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes

    def status_at(self, now: datetime) -> str:
        if self.revoked is not None:
            return self.Status.REVOKED
        if self.expires is not None and self.expires <= now:
            return self.Status.EXPIRED
        return self.Status.ACTIVE

    @property
    def status(self) -> str:
        return self.status_at(timezone.now())

    @property
    def ordered_scopes(self) -> list[str]:
        """The scopes in the order of ``Scope``, for lists and messages."""
        return [scope for scope in Scope.values if scope in self.scopes]


class SignInFailure(models.Model):
    """Failed sign-ins from one client address in one window of NPULAB_AUTH_FAILURE_RATE.

    In the database, so every web process and server counts the same failures: a
    per-process count let a flood through once per process (npulab.accounts.lockout).
    """

    address = models.CharField(max_length=64)
    window = models.BigIntegerField()
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["address", "window"], name="sign_in_failure_once")
        ]

    def __str__(self) -> str:
        return f"{self.address}: {self.count} in window {self.window}"
