"""Who may see and change which run: the one check behind every page and API that takes one.

A run belongs to a project. Whoever has a role there (viewer, member, owner;
a superuser is owner everywhere) may read the run; anyone else is answered
404 as if it did not exist, so ids reveal nothing. Changing a run (cancel,
restart, pin a checkpoint, add a profile) needs the member role, and then
being its submitter, staff or an owner of the project.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404

from npulab.projects.models import Membership, role_at_least
from npulab.projects.selectors import member_project_ids, needs_role, role_in
from npulab.runs.models import Run

Role = Membership.Role


def visible_runs(user: Any, runs: QuerySet[Run] | None = None) -> QuerySet[Run]:
    """``runs`` (every run by default) narrowed to those of the user's projects."""
    runs = Run.objects.all() if runs is None else runs
    if not (user is not None and user.is_authenticated and user.is_active):
        return runs.none()
    if user.is_superuser:
        return runs
    return runs.filter(project_id__in=member_project_ids(user))


def run_for(user: Any, pk: int, runs: QuerySet[Run] | None = None, doing: str = "") -> Run:
    """The run ``pk`` if the user may see it (Http404 otherwise).

    With ``doing`` (what the caller is about to do, "cancel it"), the user must
    also be allowed to change it: PermissionDenied says why not.
    """
    run = visible_runs(user, runs).filter(pk=pk).first()
    if run is None:
        raise Http404(f"No run #{pk}.")
    if doing:
        why = change_refused(user, run, doing)
        if why:
            raise PermissionDenied(why)
    return run


def change_refused(user: Any, run: Run, doing: str) -> str:
    """Why the user may not ``doing`` (e.g. "cancel it") to ``run``; "" if they may."""
    role = role_in(user, run.project_id)
    if not role_at_least(role, Role.MEMBER):
        return needs_role(run.project, role or "non-member", Role.MEMBER)
    if role == Role.OWNER or user.is_staff or run.submitted_by_id == user.pk:
        return ""
    return f"Only the run's submitter, its project's owners or staff may {doing}."


def may_change(user: Any, run: Run) -> bool:
    """Whether the user may cancel, restart and otherwise change ``run``."""
    return not change_refused(user, run, "change it")
