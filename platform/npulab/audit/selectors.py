"""Reading the audit log."""

from __future__ import annotations

from django.db.models import QuerySet

from npulab.audit.models import AuditEntry


def entries_for(target_type: str, target_id: object, limit: int = 20) -> QuerySet[AuditEntry]:
    """The newest entries about one object."""
    return AuditEntry.objects.filter(
        target_type=target_type, target_id=str(target_id)
    ).select_related("user")[:limit]
