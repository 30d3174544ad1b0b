"""Writing the audit log: one ``record`` call per action, from the service that did it."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from npulab.audit.models import AuditEntry

MAX_NOTE_CHARS = 2000


def record(
    action: str,
    *,
    target_type: str,
    target_id: object,
    target_label: str = "",
    user: AbstractBaseUser | None = None,
    host_name: str = "",
    note: str = "",
    data: dict[str, Any] | None = None,
) -> AuditEntry:
    """Record that ``user`` (or the worker of ``host_name``, or else the platform) did ``action``.

    Call it inside the transaction of the change itself, so an entry exists
    exactly when the change does.
    """
    if user is not None and user.is_authenticated:
        kind, label = AuditEntry.ActorKind.USER, user.get_username()
    elif host_name:
        kind, label, user = AuditEntry.ActorKind.HOST, host_name, None
    else:
        kind, label, user = AuditEntry.ActorKind.SYSTEM, "npulab", None
    return AuditEntry.objects.create(
        actor_kind=kind,
        user=user,
        actor_label=label,
        action=action,
        target_type=target_type,
        target_id=str(target_id),
        target_label=target_label[:200],
        note=note[:MAX_NOTE_CHARS],
        data=data or {},
    )
