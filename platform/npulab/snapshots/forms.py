from __future__ import annotations

from django import forms

from npulab.snapshots.models import Snapshot


class KnownGoodForm(forms.Form):
    note = forms.CharField(
        max_length=2000,
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Why it is good: what ran well on it, who checked.",
    )


class DiffForm(forms.Form):
    """Two snapshots to compare, by id."""

    a = forms.ModelChoiceField(queryset=Snapshot.objects.all(), label="From")
    b = forms.ModelChoiceField(queryset=Snapshot.objects.all(), label="To")


class PlannedTargetForm(forms.Form):
    """A version set a host is meant to move to, for the upgrade review."""

    cann = forms.CharField(max_length=40, required=False, label="CANN", help_text="e.g. 8.3.RC1")
    torch_npu = forms.CharField(max_length=40, required=False, label="torch_npu")
    torch = forms.CharField(max_length=40, required=False)
    python = forms.CharField(max_length=20, required=False, label="Python")

    def clean(self) -> dict:
        data = super().clean()
        if not any(data.get(name) for name in ("cann", "torch_npu", "torch", "python")):
            raise forms.ValidationError("Name at least one version to plan for.")
        return data
