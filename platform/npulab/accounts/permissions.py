"""Who may call the user API: users; the agent API's permission is the agent app's."""

from __future__ import annotations

from rest_framework import permissions


class IsUser(permissions.BasePermission):
    """A logged-in user or a user token; host tokens are refused."""

    message = (
        "This endpoint needs a user session or user token; "
        "host tokens may only call /api/v1/agent/."
    )

    def has_permission(self, request, view) -> bool:
        return bool(request.user and request.user.is_authenticated)
