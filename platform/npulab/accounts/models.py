from __future__ import annotations

from django.conf import settings
from django.db import models

from npulab.accounts import tokens


class ApiToken(models.Model):
    """A user's REST API token. Only its SHA-256 digest is stored; the token is shown once."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True)
    display = models.CharField(max_length=tokens.DISPLAY_CHARS + 1)
    digest = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.display}… ({self.user})"
