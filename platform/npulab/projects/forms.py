from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model

from npulab.projects.models import Membership, Pool, Project, slug_validator


class ProjectForm(forms.Form):
    slug = forms.CharField(
        max_length=63,
        validators=[slug_validator],
        help_text="In URLs and on the command line (npulab submit --project SLUG).",
    )
    name = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    pools = forms.ModelMultipleChoiceField(
        queryset=Pool.objects.all(),
        required=False,
        to_field_name="name",
        help_text="The runs go only to hosts of these pools.",
    )

    def clean_slug(self) -> str:
        slug = self.cleaned_data["slug"]
        if Project.objects.filter(slug=slug).exists():
            raise forms.ValidationError(f"A project '{slug}' exists already.")
        return slug


class MemberAddForm(forms.Form):
    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=Membership.Role.choices, initial=Membership.Role.MEMBER)

    def clean_username(self) -> object:
        username = self.cleaned_data["username"].strip()
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise forms.ValidationError(f"No active user '{username}'.")
        return user
