"""The operator role: who may act on the shared machines rather than on one project's runs.

An operator is a superuser, or a user with the ``health.operate_hosts``
permission, which the "operators" group (made by the health app's migration)
holds: add people to that group in the admin. Operators drain and undrain
hosts, clear bad devices, mark snapshots known good (which the upgrade review's
go / no-go rests on), ask hosts for snapshots, create projects and move hosts
between pools. The role lives here, below every app that checks it; the
permission keeps its first owner's name so existing grants stay valid.
"""

from __future__ import annotations

from typing import Any

from rest_framework import permissions

from npulab.core import errors

OPERATORS_GROUP = "operators"
OPERATE_PERMISSION = "health.operate_hosts"
NOT_AN_OPERATOR = (
    "This needs the operator role (draining hosts, clearing devices, known-good marks, "
    "snapshot requests, projects and pools): a superuser or a member of the "
    f"'{OPERATORS_GROUP}' group (the {OPERATE_PERMISSION} permission)."
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
