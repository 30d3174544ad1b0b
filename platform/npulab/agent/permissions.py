"""Who may call the agent API: host workers, with their host token."""

from __future__ import annotations

from rest_framework import permissions

from npulab.hosts.models import Host


class IsHostAgent(permissions.BasePermission):
    """A host worker presenting its host token."""

    message = "This endpoint is for host workers; authenticate with the host's token."

    def has_permission(self, request, view) -> bool:
        return isinstance(request.auth, Host)
