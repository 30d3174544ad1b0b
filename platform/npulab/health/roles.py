"""The operator role: who may drain and undrain hosts and clear bad devices.

An operator is a superuser, or a user with the ``health.operate_hosts``
permission, which the "operators" group (made by this app's migration) holds:
add people to that group in the admin. Other apps' operator actions (known-good
marks, tokens) may check ``is_operator`` too.
"""

from __future__ import annotations

from typing import Any

from rest_framework import permissions

from npulab.core import errors

OPERATORS_GROUP = "operators"
OPERATE_PERMISSION = "health.operate_hosts"
NOT_AN_OPERATOR = (
    "Draining, undraining and clearing devices need the operator role: "
    f"a superuser or a member of the '{OPERATORS_GROUP}' group "
    f"(the {OPERATE_PERMISSION} permission)."
)


def is_operator(user: Any) -> bool:
    return bool(
        user is not None
        and user.is_authenticated
        and user.is_active
        and (user.is_superuser or user.has_perm(OPERATE_PERMISSION))
    )


class IsOperator(permissions.BasePermission):
    """DRF permission: the caller is an operator (403 with the reason otherwise)."""

    message = NOT_AN_OPERATOR
    code = errors.PERMISSION_DENIED

    def has_permission(self, request, view) -> bool:
        return is_operator(request.user)
