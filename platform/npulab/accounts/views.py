"""The sign-in page, the API tokens page (a user makes, lists and revokes their own tokens)
and the Users page (an admin adds people and gives them a role)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from npulab.accounts import lockout
from npulab.accounts.forms import TokenCreateForm, UserCreateForm, UserRoleForm
from npulab.accounts.models import ApiToken
from npulab.accounts.services import do_issue_api_token, do_revoke_api_token
from npulab.accounts.users import (
    UserInvalid,
    do_create_user,
    do_set_user_active,
    do_set_user_role,
    role_of,
)


class SignInView(LoginView):
    """Django's sign-in, refusing an address past NPULAB_AUTH_FAILURE_RATE failures (429)."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        wait = lockout.retry_after(request)
        if wait is None:
            return super().post(request, *args, **kwargs)
        message = f"Too many failed sign-ins from your address: try again in {wait} s."
        context = self.get_context_data(form=self.get_form_class()(request), locked_out=message)
        return self.render_to_response(context, status=429)

    def form_invalid(self, form: Any) -> HttpResponse:
        lockout.record_failure(self.request)
        return super().form_invalid(form)


@login_required
@require_http_methods(["GET", "POST"])
def token_list(request: HttpRequest) -> HttpResponse:
    """The user's tokens; a POST makes one and shows it, this once, on the answer."""
    plain = None
    if request.method == "POST":
        form = TokenCreateForm(request.POST)
        if form.is_valid():
            _, plain = do_issue_api_token(
                request.user,
                name=form.cleaned_data["name"],
                scopes=form.cleaned_data["scopes"],
                expires=form.expires(),
            )
            # A fresh form: the answer must not invite a second identical token.
            form = TokenCreateForm()
    else:
        form = TokenCreateForm()
    context = {
        "form": form,
        "plain": plain,
        "tokens": ApiToken.objects.filter(user=request.user),
    }
    template = "accounts/partials/tokens.html" if request.htmx else "accounts/token_list.html"
    response = render(request, template, context)
    if plain:
        # The answer holds a secret: no cache may keep it.
        response["Cache-Control"] = "no-store"
    return response


@login_required
@require_http_methods(["GET", "POST"])
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    """GET asks for confirmation (without JavaScript); POST revokes the token."""
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    if request.method == "GET":
        return render(request, "accounts/token_revoke.html", {"token": token})
    do_revoke_api_token(token, by=request.user)
    if request.htmx:
        context = {
            "form": TokenCreateForm(),
            "plain": None,
            "tokens": ApiToken.objects.filter(user=request.user),
            "revoked": token,
        }
        return render(request, "accounts/partials/tokens.html", context)
    messages.success(request, f"Token {token.display}… revoked.")
    return redirect("accounts:token_list")


def _admin_only(request: HttpRequest) -> None:
    if not request.user.is_superuser:
        raise PermissionDenied("Managing people needs the admin role (a superuser).")


@login_required
@require_http_methods(["GET", "POST"])
def user_list(request: HttpRequest) -> HttpResponse:
    """Everyone with their platform role; a POST adds a person (admins only)."""
    _admin_only(request)
    form = UserCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            made = do_create_user(**form.cleaned_data, by=request.user)
        except UserInvalid as exc:
            for field, text in exc.fields.items():
                form.add_error(field if field in form.fields else None, text)
        else:
            messages.info(request, f"{made.username} added as {role_of(made)}.")
            return redirect("accounts:user_list")
    people = []
    for person in get_user_model().objects.order_by("username"):
        role = role_of(person)
        change = UserRoleForm(initial={"role": role, "active": person.is_active})
        people.append((person, role, change))
    return render(request, "accounts/user_list.html", {"form": form, "people": people})


@login_required
@require_POST
def user_change(request: HttpRequest, pk: int) -> HttpResponse:
    """Change one person's platform role or whether they may sign in (admins only)."""
    _admin_only(request)
    person = get_object_or_404(get_user_model(), pk=pk)
    form = UserRoleForm(request.POST)
    if form.is_valid():
        try:
            do_set_user_role(person, form.cleaned_data["role"], by=request.user)
            do_set_user_active(person, form.cleaned_data["active"], by=request.user)
        except UserInvalid as exc:
            messages.error(request, str(exc))
        else:
            messages.info(request, f"{person.get_username()}: {role_of(person)}.")
    return redirect("accounts:user_list")
