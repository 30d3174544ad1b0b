"""The sign-in page, and the API tokens page: a user makes, lists and revokes their own tokens."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from npulab.accounts import lockout
from npulab.accounts.forms import TokenCreateForm
from npulab.accounts.models import ApiToken
from npulab.accounts.services import do_issue_api_token, do_revoke_api_token


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
