"""Write paths for projects and their members; every change is in the audit log."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from npulab.audit import actions
from npulab.audit.services import record
from npulab.core.errors import Conflict
from npulab.projects.models import Membership, Pool, Project, default_project

Role = Membership.Role


def on_user_saved(sender: Any, instance: AbstractBaseUser, created: bool, **kwargs: Any) -> None:
    """A new user joins the default project with NPULAB_DEFAULT_PROJECT_ROLE (unless none)."""
    role = settings.NPULAB["DEFAULT_PROJECT_ROLE"]
    if not created or kwargs.get("raw") or role == "none":
        return
    Membership.objects.get_or_create(
        project=default_project(), user=instance, defaults={"role": role}
    )


def _audit(action: str, project: Project, by: AbstractBaseUser | None, **data: Any) -> None:
    record(
        action,
        target_type="project",
        target_id=project.slug,
        target_label=project.name,
        user=by,
        data=data,
    )


@transaction.atomic
def do_create_pool(by: AbstractBaseUser, name: str, description: str = "") -> Pool:
    pool = Pool(name=name, description=description)
    pool.full_clean()
    pool.save()
    record(actions.POOL_CREATE, target_type="pool", target_id=pool.name, user=by)
    return pool


@transaction.atomic
def do_create_project(
    by: AbstractBaseUser,
    slug: str,
    name: str,
    description: str = "",
    pools: Iterable[Pool] = (),
) -> Project:
    """A new project on ``pools``, with its creator as its first owner."""
    project = Project(slug=slug, name=name, description=description)
    project.full_clean()
    project.save()
    pools = list(pools)
    project.pools.set(pools)
    Membership.objects.create(project=project, user=by, role=Role.OWNER)
    _audit(actions.PROJECT_CREATE, project, by, pools=[pool.name for pool in pools])
    return project


@transaction.atomic
def do_add_member(
    project: Project, user: AbstractBaseUser, role: str, by: AbstractBaseUser
) -> Membership:
    if Membership.objects.filter(project=project, user=user).exists():
        raise Conflict(f"{user.get_username()} is already in project '{project.slug}'")
    membership = Membership.objects.create(project=project, user=user, role=role)
    _audit(actions.PROJECT_ADD_MEMBER, project, by, user=user.get_username(), role=role)
    return membership


@transaction.atomic
def do_change_member(membership: Membership, role: str, by: AbstractBaseUser) -> Membership:
    membership = Membership.objects.select_for_update().get(pk=membership.pk)
    if membership.role == role:
        return membership
    if membership.role == Role.OWNER:
        _keep_an_owner(membership)
    before, membership.role = membership.role, role
    membership.save(update_fields=["role", "updated"])
    _audit(
        actions.PROJECT_CHANGE_MEMBER,
        membership.project,
        by,
        user=membership.user.get_username(),
        role=role,
        was=before,
    )
    return membership


@transaction.atomic
def do_remove_member(membership: Membership, by: AbstractBaseUser) -> None:
    membership = Membership.objects.select_for_update().get(pk=membership.pk)
    if membership.role == Role.OWNER:
        _keep_an_owner(membership)
    membership.delete()
    _audit(
        actions.PROJECT_REMOVE_MEMBER,
        membership.project,
        by,
        user=membership.user.get_username(),
        role=membership.role,
    )


def _keep_an_owner(membership: Membership) -> None:
    # A project nobody but a superuser could manage again is a mistake, not a wish.
    others = Membership.objects.filter(project=membership.project_id, role=Role.OWNER).exclude(
        pk=membership.pk
    )
    if not others.exists():
        raise Conflict(
            f"{membership.user.get_username()} is the last owner of project "
            f"'{membership.project.slug}': make another member owner first"
        )
