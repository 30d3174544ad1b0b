from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import forms
from django.utils import timezone

from npulab.accounts.models import DEFAULT_SCOPES, Scope
from npulab.accounts.users import ROLES, USER

MAX_EXPIRY_DAYS = 3650


class TokenCreateForm(forms.Form):
    """A new API token: what it is for, what it may do, how long it lives."""

    name = forms.CharField(
        max_length=100,
        required=False,
        help_text="What the token is for, e.g. the pipeline that uses it.",
    )
    scopes = forms.MultipleChoiceField(
        choices=Scope.choices,
        initial=DEFAULT_SCOPES,
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "Choose at least one scope."},
    )
    expires_days = forms.IntegerField(
        label="Expires after (days)",
        min_value=1,
        max_value=MAX_EXPIRY_DAYS,
        required=False,
        initial=90,
        help_text="Empty: the token never expires.",
    )

    def expires(self) -> Any:
        days = self.cleaned_data.get("expires_days")
        return timezone.now() + timedelta(days=days) if days else None


class UserCreateForm(forms.Form):
    """A new person and their platform role (an admin's page)."""

    username = forms.CharField(max_length=150)
    email = forms.EmailField(required=False)
    password = forms.CharField(widget=forms.PasswordInput, strip=False)
    role = forms.ChoiceField(choices=[(role, role) for role in ROLES], initial=USER)


class UserRoleForm(forms.Form):
    """Another platform role, or (de)activation, for one person."""

    role = forms.ChoiceField(choices=[(role, role) for role in ROLES])
    active = forms.BooleanField(required=False)
