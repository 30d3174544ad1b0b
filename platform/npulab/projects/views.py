"""The project pages: the list, a project with its members, pools and runs, and its changes."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from npulab.accounts.roles import NOT_AN_OPERATOR, is_operator
from npulab.core.errors import Conflict
from npulab.projects.forms import MemberAddForm, ProjectForm
from npulab.projects.models import Membership
from npulab.projects.pages import project_page
from npulab.projects.selectors import project_for, role_in, visible_projects
from npulab.projects.services import (
    do_add_member,
    do_change_member,
    do_create_project,
    do_remove_member,
)

Role = Membership.Role


@login_required
def project_list(request: HttpRequest) -> HttpResponse:
    projects = list(
        visible_projects(request.user)
        .prefetch_related("pools")
        .annotate(member_count=Count("memberships", distinct=True))
        .annotate(run_count=Count("runs", distinct=True))
    )
    for project in projects:
        project.role = role_in(request.user, project)
    context = {"projects": projects, "can_create": is_operator(request.user)}
    return render(request, "projects/project_list.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def project_create(request: HttpRequest) -> HttpResponse:
    if not is_operator(request.user):
        raise PermissionDenied(NOT_AN_OPERATOR)
    form = ProjectForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        project = do_create_project(request.user, **form.cleaned_data)
        messages.success(request, f"Project {project.slug} made; you are its owner.")
        return redirect(project)
    return render(request, "projects/project_form.html", {"form": form})


@login_required
def project_detail(request: HttpRequest, slug: str) -> HttpResponse:
    project = project_for(request.user, slug)
    role = role_in(request.user, project)
    context = {
        "project": project,
        "role": role,
        "can_manage": role == Role.OWNER,
        "can_submit": role in (Role.MEMBER, Role.OWNER),
        "memberships": project.memberships.select_related("user"),
        "pools": project.pools.annotate(host_count=Count("hosts")),
        "roles": Role.choices,
        "add_form": MemberAddForm(),
        **project_page.context(project, request.user),
    }
    return render(request, "projects/project_detail.html", context)


@login_required
@require_POST
def member_add(request: HttpRequest, slug: str) -> HttpResponse:
    project = project_for(request.user, slug, Role.OWNER)
    form = MemberAddForm(request.POST)
    if not form.is_valid():
        messages.error(
            request, " ".join(message for errors in form.errors.values() for message in errors)
        )
        return redirect(project)
    user = form.cleaned_data["username"]
    try:
        do_add_member(project, user, form.cleaned_data["role"], by=request.user)
    except Conflict as exc:
        messages.warning(request, exc.detail)
    else:
        messages.success(request, f"{user.get_username()} joined as {form.cleaned_data['role']}.")
    return redirect(project)


@login_required
@require_POST
def member_change(request: HttpRequest, slug: str, username: str) -> HttpResponse:
    """The role select of a member's row, or its Remove button (``action=remove``)."""
    project = project_for(request.user, slug, Role.OWNER)
    membership = get_object_or_404(
        Membership.objects.select_related("user", "project"),
        project=project,
        user__username=username,
    )
    try:
        if request.POST.get("action") == "remove":
            do_remove_member(membership, by=request.user)
            messages.info(request, f"{username} is no longer in {project.slug}.")
        elif request.POST.get("role") in Role.values:
            do_change_member(membership, request.POST["role"], by=request.user)
            messages.success(request, f"{username} is now {request.POST['role']}.")
        else:
            messages.error(request, "Choose a role: owner, member or viewer.")
    except Conflict as exc:
        messages.error(request, exc.detail)
    return redirect(project)
