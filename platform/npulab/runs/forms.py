"""The run submission form, built from the kind's spec fields (workers.contract.kinds)."""

from __future__ import annotations

import shlex
from typing import Any

from django import forms
from django.conf import settings

from npulab.hosts.models import DeviceType, Host
from npulab.runs.services import PRIORITY_RANGE, SubmissionInvalid
from workers.contract import kinds
from workers.contract.spec import Field

# Shown in every kind's form, in this order, before the kind's own fields.
COMMON_SPEC_FIELDS = ("device_type", "devices", "timeout_s")
# Spec fields the form leaves to the API (they need a file or a mapping).
API_ONLY_FIELDS = ("kind", "python", "env")


class RunSubmitForm(forms.Form):
    """Queueing fields plus the spec fields of one run kind."""

    kind = forms.ChoiceField()
    host = forms.ChoiceField(required=False, help_text="Any host that fits, or this one.")
    name = forms.CharField(max_length=200, required=False)
    tags = forms.CharField(required=False, help_text="Comma-separated.")
    priority = forms.IntegerField(
        initial=0, min_value=PRIORITY_RANGE[0], max_value=PRIORITY_RANGE[1]
    )

    def __init__(self, *args: Any, kind: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        declared = kinds.all_kinds()
        self.fields["kind"].choices = [(each.name, each.name) for each in declared]
        default = kinds.get(settings.NPULAB["DEFAULT_KIND"]) or declared[0]
        self.kind = kinds.get(kind or self.data.get("kind") or default.name) or default
        self.fields["kind"].initial = self.kind.name
        self.kind_title = self.kind.title
        hosts = Host.objects.order_by("name").values_list("name", "device_type", "status")
        self.fields["host"].choices = [("", "any host")] + [
            (name, f"{name} ({device_type}, {status})") for name, device_type, status in hosts
        ]
        self.spec_field_names: list[str] = []
        for field in self.kind.fields:
            if field.name not in API_ONLY_FIELDS:
                self.fields[field.name] = _form_field(field)
                self.spec_field_names.append(field.name)
        self.order_fields(["kind", *COMMON_SPEC_FIELDS, "host"])

    def kind_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in self.spec_field_names if name not in COMMON_SPEC_FIELDS]

    def common_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in COMMON_SPEC_FIELDS]

    def document(self) -> dict[str, Any]:
        """The submission as the API takes it."""
        data = self.cleaned_data
        document: dict[str, Any] = {"kind": self.kind.name}
        document.update({name: data[name] for name in self.spec_field_names})
        document["priority"] = data["priority"]
        document["name"] = data["name"]
        document["tags"] = [tag.strip() for tag in data["tags"].split(",") if tag.strip()]
        if data["host"]:
            document["host"] = data["host"]
        return document

    def add_submission_errors(self, error: SubmissionInvalid) -> None:
        for field, message in error.errors.items():
            self.add_error(field if field in self.fields else None, f"{field}: {message}")


def _form_field(field: Field) -> forms.Field:
    options: dict[str, Any] = {"help_text": field.help, "required": field.required}
    if not field.required:
        options["initial"] = field.default
    if field.choices is not None:
        choices = [(choice, choice) for choice in field.choices]
        if field.name == "device_type":
            choices = list(DeviceType.choices)
        return forms.ChoiceField(choices=choices, **options)
    if field.type == "integer":
        return forms.IntegerField(min_value=field.minimum, max_value=field.maximum, **options)
    if field.type == "number":
        return forms.FloatField(min_value=field.minimum, max_value=field.maximum, **options)
    if field.type == "boolean":
        options["required"] = False
        return forms.BooleanField(**options)
    if field.type == "strings":
        return WordsField(**options)
    return forms.CharField(**options)


class WordsField(forms.CharField):
    """A list of strings typed as a shell command line: ``--lr 0.1 --name 'run a'``."""

    def prepare_value(self, value: Any) -> Any:
        return shlex.join(value) if isinstance(value, list) else value

    def to_python(self, value: Any) -> list[str]:
        if isinstance(value, list):
            return value
        try:
            return shlex.split(super().to_python(value))
        except ValueError as error:  # an unclosed quote
            raise forms.ValidationError(f"not a valid command line: {error}") from error
