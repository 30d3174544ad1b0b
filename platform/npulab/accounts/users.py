"""People and their platform role: user, operator or admin, set by an admin.

The platform roles are Django's own: an admin is a superuser, an operator a member of
the operators group (``npulab.accounts.roles``), a user neither. A project's roles
(viewer, member, owner) are set on the project's page ([projects.md]). The browser's
Users page and ``manage.py users`` both write through here.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group, Permission
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction

from npulab.accounts.roles import OPERATE_PERMISSION, OPERATORS_GROUP
from npulab.audit import actions
from npulab.audit.services import record

USER, OPERATOR, ADMIN = "user", "operator", "admin"
ROLES = (USER, OPERATOR, ADMIN)


class UserInvalid(ValueError):
    """A user that cannot be made or changed so; ``fields`` names what is wrong."""

    def __init__(self, fields: dict[str, str]) -> None:
        super().__init__("; ".join(f"{name}: {text}" for name, text in fields.items()))
        self.fields = fields


def role_of(user: Any) -> str:
    if user.is_superuser:
        return ADMIN
    if user.groups.filter(name=OPERATORS_GROUP).exists():
        return OPERATOR
    return USER


def _apply_role(user: Any, role: str) -> None:
    if role not in ROLES:
        raise UserInvalid({"role": f"one of {', '.join(ROLES)}"})
    user.is_superuser = user.is_staff = role == ADMIN
    user.save(update_fields=["is_superuser", "is_staff"])
    group = _operators_group()
    if role == OPERATOR:
        user.groups.add(group)
    else:
        user.groups.remove(group)


def _operators_group() -> Group:
    """The operators group, holding the operator permission.

    The health app's migration makes both; a database that lost the group (a
    hand-deleted row, a flushed test database) gets it back whole here, since a
    member of a group without the permission would be an operator in name only.
    """
    group, _ = Group.objects.get_or_create(name=OPERATORS_GROUP)
    app_label, codename = OPERATE_PERMISSION.split(".")
    permission = Permission.objects.get(content_type__app_label=app_label, codename=codename)
    group.permissions.add(permission)
    return group


@transaction.atomic
def do_create_user(
    username: str,
    password: str,
    role: str = USER,
    email: str = "",
    by: AbstractBaseUser | None = None,
) -> Any:
    """A new active user with ``role``; UserInvalid for a taken name or a weak password."""
    users = get_user_model()
    if not username.strip():
        raise UserInvalid({"username": "required"})
    if users.objects.filter(username=username).exists():
        raise UserInvalid({"username": f"{username!r} is taken"})
    user = users(username=username, email=email)
    try:
        validate_password(password, user)
    except ValidationError as exc:
        raise UserInvalid({"password": " ".join(exc.messages)}) from None
    user.set_password(password)
    user.save()
    _apply_role(user, role)
    record(
        actions.USER_CREATE, target_type="user", target_id=username, user=by, data={"role": role}
    )
    return user


@transaction.atomic
def do_set_user_role(user: Any, role: str, by: AbstractBaseUser | None = None) -> Any:
    """Give ``user`` the platform role ``role`` (the audit log keeps the one before)."""
    before = role_of(user)
    if before == role:
        return user
    if before == ADMIN and user == by:
        raise UserInvalid({"role": "an admin cannot take their own admin role"})
    _apply_role(user, role)
    record(
        actions.USER_SET_ROLE,
        target_type="user",
        target_id=user.get_username(),
        user=by,
        data={"role": role, "was": before},
    )
    return user


@transaction.atomic
def do_set_user_active(user: Any, active: bool, by: AbstractBaseUser | None = None) -> Any:
    """Let ``user`` sign in (and their tokens work) or not; nothing of theirs is deleted."""
    if user == by and not active:
        raise UserInvalid({"active": "an admin cannot deactivate themselves"})
    if user.is_active != active:
        user.is_active = active
        user.save(update_fields=["is_active"])
        record(
            actions.USER_SET_ACTIVE,
            target_type="user",
            target_id=user.get_username(),
            user=by,
            data={"active": active},
        )
    return user
