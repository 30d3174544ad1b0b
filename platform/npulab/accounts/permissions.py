"""Who may call what: users on the user API, host workers on the agent API only."""

from __future__ import annotations

from rest_framework import permissions

from npulab.hosts.models import Host


class IsUser(permissions.BasePermission):
    """A logged-in user or a user token; host tokens are refused."""

    message = (
        "This endpoint needs a user session or user token; "
        "host tokens may only call /api/v1/agent/."
    )

    def has_permission(self, request, view) -> bool:
        return bool(request.user and request.user.is_authenticated)


class IsHostAgent(permissions.BasePermission):
    """A host worker presenting its host token."""

    message = "This endpoint is for host workers; authenticate with the host's token."

    def has_permission(self, request, view) -> bool:
        return isinstance(request.auth, Host)
