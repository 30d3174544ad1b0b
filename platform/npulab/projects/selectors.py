"""Who may see which project, and with which role: the reads every app's checks go through.

A superuser acts as the owner of every project; everyone else has the role of
their membership, or none. Without a role a project does not exist for the
user: its pages and its runs answer 404, never 403, so a name is not revealed.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404

from npulab.projects.models import Membership, Project, role_at_least

Role = Membership.Role


def role_in(user: Any, project: Project | int) -> str | None:
    """The user's role in ``project`` (or the project of that key): owner, member, viewer, None."""
    if not (user is not None and user.is_authenticated and user.is_active):
        return None
    if user.is_superuser:
        return Role.OWNER
    cache = getattr(user, "_project_roles", None)
    if cache is None:
        # Once per request: a page checks many runs of few projects.
        cache = user._project_roles = dict(
            Membership.objects.filter(user=user).values_list("project_id", "role")
        )
    return cache.get(project if isinstance(project, int) else project.pk)


def visible_projects(user: Any) -> QuerySet[Project]:
    """The projects the user has a role in (every one for a superuser)."""
    if not (user is not None and user.is_authenticated and user.is_active):
        return Project.objects.none()
    if user.is_superuser:
        return Project.objects.all()
    return Project.objects.filter(pk__in=member_project_ids(user))


def member_project_ids(user: Any) -> QuerySet:
    """The ids of the user's projects, as a subquery (every project for a superuser)."""
    if user.is_superuser:
        return Project.objects.values("pk")
    return Membership.objects.filter(user=user).values("project_id")


def submittable_projects(user: Any) -> QuerySet[Project]:
    """The projects the user may submit runs to (member or owner)."""
    if user.is_superuser:
        return Project.objects.all()
    return Project.objects.filter(
        memberships__user=user, memberships__role__in=[Role.MEMBER, Role.OWNER]
    )


def project_for(user: Any, slug: str, role: str = Role.VIEWER) -> Project:
    """The project ``slug`` if the user has at least ``role`` in it.

    Http404 when the user has no role there (or it does not exist); PermissionDenied,
    saying which role is needed, when the user's role is lower.
    """
    project = Project.objects.filter(slug=slug).first()
    found = role_in(user, project) if project is not None else None
    if project is None or found is None:
        raise Http404(f"No project '{slug}'.")
    if not role_at_least(found, role):
        raise PermissionDenied(needs_role(project, found, role))
    return project


def needs_role(project: Project, role: str, wanted: str) -> str:
    """Why a user with ``role`` may not do what needs ``wanted``, for a 403's detail."""
    what = {
        Role.MEMBER: "submit, cancel or restart its runs",
        Role.OWNER: "manage its members",
    }.get(wanted, "do this")
    return (
        f"You are a {role} of project '{project.slug}': only its "
        f"{'owners' if wanted == Role.OWNER else 'members and owners'} may {what}."
    )
