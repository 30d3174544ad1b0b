"""Who may call the user API: users, and a user token only within its scopes.

The agent API's permission is the agent app's.
"""

from __future__ import annotations

from rest_framework import permissions

from npulab.accounts.models import ApiToken, Scope
from npulab.core import errors


class IsUser(permissions.BasePermission):
    """A logged-in user or a user token; host tokens are refused."""

    message = (
        "This endpoint needs a user session or user token; "
        "host tokens may only call /api/v1/agent/."
    )

    def has_permission(self, request, view) -> bool:
        return bool(request.user and request.user.is_authenticated)


def required_scope(request, view) -> str:
    """The scope a token needs for this request.

    A view (or a viewset action, ``@action(..., token_scope=...)``) names it in
    ``token_scope``: one scope, or a mapping of HTTP method to scope. Otherwise
    reading (GET, HEAD, OPTIONS) needs ``read`` and anything else ``submit``.
    """
    declared = getattr(view, "token_scope", None)
    if isinstance(declared, dict):
        declared = declared.get(request.method)
    if declared:
        return str(declared)
    return Scope.READ if request.method in permissions.SAFE_METHODS else Scope.SUBMIT


class HasTokenScope(IsUser):
    """The default permission of the user API: a user, and a token with the scope needed.

    A browser session is not scoped: its user may do what the views allow.
    """

    def has_permission(self, request, view) -> bool:
        if not super().has_permission(request, view):
            return False
        token = request.auth
        if not isinstance(token, ApiToken):
            return True
        scope = required_scope(request, view)
        if token.has_scope(scope):
            return True
        # Instance attributes: DRF makes a permission object per request.
        self.code = errors.INSUFFICIENT_SCOPE
        self.message = (
            f"This token lacks the `{scope}` scope, which {request.method} "
            f"{request.path} needs; it has {', '.join(token.ordered_scopes) or 'none'}. "
            "Make a token with that scope on your API tokens page."
        )
        return False
