"""The run submission form, built from the kind's spec fields (workers.contract.kinds).

One round of validation reports every problem at once: each field as the form
reads it, then each value as the spec's own fields check it (the same checks
the API and the runner make), then the kind's checks across fields, on
whatever could be read.
"""

from __future__ import annotations

import copy
import json
import shlex
from typing import Any

from django import forms
from django.conf import settings

from npulab.hosts.models import DeviceType, Host
from npulab.projects.models import DEFAULT_PROJECT, Project
from npulab.projects.selectors import submittable_projects
from npulab.runs.services import NO_HOST_HINT, PRIORITY_RANGE, SubmissionInvalid
from workers.contract import kinds
from workers.contract.entries import BUILTIN_JOBS, BUILTIN_PREFIX
from workers.contract.kinds import Kind
from workers.contract.ranks import ALL, DEFAULT_METRIC_RANKS
from workers.contract.spec import Field

# Shown in every kind's form, in this order, before the kind's own fields.
COMMON_SPEC_FIELDS = ("device_type", "devices", "timeout_s")
# Where and how the run's process starts: shown after the kind's own fields.
ENVIRONMENT_FIELDS = ("python", "env")
# The timeout is typed in hours and minutes; its errors are shown beside the hours.
TIMEOUT_FIELD = "timeout_s"
FORM_FIELD_OF = {TIMEOUT_FIELD: "timeout_hours"}
# The entry (a kind's field of this name) is a built-in job or a path typed beside it.
ENTRY_FIELD = "entry"
ENTRY_PATH = "path"
EXAMPLES = {
    "args": "--lr 0.01 --batch-size 64 --label 'first try'",
    "python": "/opt/venvs/torch_npu/bin/python",
    "env": "# for example:\nASCEND_GLOBAL_LOG_LEVEL=3\nHCCL_CONNECT_TIMEOUT=1200",
    "entry_path": "train.py, or package.module:main",
    "profile": '{"wait": 1, "warmup": 1, "active": 3}',
}
# The API's refusal of a run no host could take names its field; the form names its box.
FORM_NO_HOST_HINT = (
    '. No registered host could ever take this run; tick "Wait for a host that could take '
    'it" to queue it until one could'
)
HELP = {
    "python": "The interpreter on the host that runs it, e.g. the torch_npu virtualenv's "
    "bin/python (its torch_npu must match the host's CANN); empty: the worker's own.",
    "env": "One KEY=VALUE a line, e.g. ASCEND_* settings or what the toolkit's set_env.sh "
    "exports (ASCEND_TOOLKIT_HOME, LD_LIBRARY_PATH); # starts a comment.",
}


class RunSubmitForm(forms.Form):
    """Queueing fields plus the spec fields of one run kind."""

    kind = forms.ChoiceField()
    project = forms.ChoiceField(
        required=False,
        help_text="Who may see the run; it goes to a host of the project's pools.",
    )
    host = forms.ChoiceField(required=False, help_text="Any host that fits, or this one.")
    wait_for_host = forms.BooleanField(
        required=False,
        label="Wait for a host that could take it",
        help_text="Queue it even when no registered host could ever run it (a host to come); "
        "it expires when none has come in time.",
    )
    name = forms.CharField(
        max_length=200, required=False, help_text="Shown in the run list beside the entry."
    )
    tags = forms.CharField(required=False, help_text="Comma-separated.")
    priority = forms.IntegerField(
        initial=0, min_value=PRIORITY_RANGE[0], max_value=PRIORITY_RANGE[1]
    )

    def __init__(
        self, *args: Any, kind: str | None = None, user: Any = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        # The projects the user may submit to; the service checks again on submission.
        projects = submittable_projects(user) if user is not None else Project.objects.all()
        self.fields["project"].choices = [
            (slug, f"{name} ({slug})") for slug, name in projects.values_list("slug", "name")
        ]
        slugs = [slug for slug, _ in self.fields["project"].choices]
        self.fields["project"].initial = DEFAULT_PROJECT if DEFAULT_PROJECT in slugs else None
        declared = kinds.all_kinds()
        self.fields["kind"].choices = [(each.name, each.name) for each in declared]
        default = kinds.get(settings.NPULAB["DEFAULT_KIND"]) or declared[0]
        self.kind: Kind = kinds.get(kind or self.data.get("kind") or default.name) or default
        self.fields["kind"].initial = self.kind.name
        self.kind_title = self.kind.title
        hosts = Host.objects.order_by("name").values_list("name", "device_type", "status")
        self.fields["host"].choices = [("", "any host")] + [
            (name, f"{name} ({device_type}, {status})") for name, device_type, status in hosts
        ]
        self.spec_field_names: list[str] = []
        for field in self.kind.fields:
            if field.name == "kind":
                continue
            self.spec_field_names.append(field.name)
            if field.name == TIMEOUT_FIELD:
                self.fields.update(_timeout_fields(field))
            elif field.name == ENTRY_FIELD:
                self.fields.update(_entry_fields(field))
            else:
                self.fields[field.name] = _form_field(field)
        self.order_fields(
            ["kind", "project", *COMMON_SPEC_FIELDS, "timeout_hours", "timeout_minutes"]
        )

    def common_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in COMMON_SPEC_FIELDS if name in self.fields]

    def timeout_fields(self) -> list[forms.BoundField]:
        return [self["timeout_hours"], self["timeout_minutes"]]

    def kind_fields(self) -> list[forms.BoundField]:
        shown = []
        for name in self.spec_field_names:
            if name in COMMON_SPEC_FIELDS or name in ENVIRONMENT_FIELDS:
                continue
            shown += (
                [self[ENTRY_FIELD], self["entry_path"]] if name == ENTRY_FIELD else [self[name]]
            )
        return shown

    def environment_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in ENVIRONMENT_FIELDS if name in self.fields]

    def spec_values(self) -> dict[str, Any]:
        """The spec fields the form could read, as the spec takes them (timeout in seconds)."""
        data = self.cleaned_data
        values: dict[str, Any] = {}
        for name in self.spec_field_names:
            if name == TIMEOUT_FIELD:
                if "timeout_hours" in data and "timeout_minutes" in data:
                    values[name] = _timeout_s(
                        data["timeout_hours"], data["timeout_minutes"], self.kind.by_name[name]
                    )
            elif name == ENTRY_FIELD:
                if ENTRY_FIELD in data and "entry_path" in data:
                    choice = data[ENTRY_FIELD]
                    values[name] = data["entry_path"].strip() if choice == ENTRY_PATH else choice
            elif name in data and (data[name] is not None or self.kind.by_name[name].required):
                # An optional number left empty, or not sent at all: the kind's default.
                values[name] = data[name]
        return values

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get(ENTRY_FIELD) == ENTRY_PATH and not data.get("entry_path", "").strip():
            self.add_error("entry_path", "Type the path of your script or its module:function.")
        values = self.spec_values()
        if TIMEOUT_FIELD in values:
            problem = _timeout_problem(values[TIMEOUT_FIELD], self.kind.by_name[TIMEOUT_FIELD])
            if problem:
                self.add_error("timeout_hours", problem)
        # Values already refused above are left out: each problem is said once.
        values = {
            name: value
            for name, value in values.items()
            if not self._has_error(FORM_FIELD_OF.get(name, name))
        }
        for name, message in spec_problems(self.kind, values).items():
            self.add_error(FORM_FIELD_OF.get(name, name), message)
        return data

    def _has_error(self, name: str) -> bool:
        if name == ENTRY_FIELD:
            return ENTRY_FIELD in self.errors or "entry_path" in self.errors
        if name == "timeout_hours":
            return "timeout_hours" in self.errors or "timeout_minutes" in self.errors
        return name in self.errors

    def document(self) -> dict[str, Any]:
        """The submission as the API takes it."""
        data = self.cleaned_data
        document: dict[str, Any] = {"kind": self.kind.name, **self.spec_values()}
        document["priority"] = data["priority"]
        document["name"] = data["name"]
        document["tags"] = [tag.strip() for tag in data["tags"].split(",") if tag.strip()]
        if data["project"]:
            document["project"] = data["project"]
        if data["host"]:
            document["host"] = data["host"]
        if data["wait_for_host"]:
            document["wait_for_host"] = True
        return document

    def add_submission_errors(self, error: SubmissionInvalid) -> None:
        """The platform's refusal on the fields it names; the rest above the form."""
        for field, message in error.errors.items():
            if message.endswith(NO_HOST_HINT):
                message = message.removesuffix(NO_HOST_HINT) + FORM_NO_HOST_HINT
            top, on_top = on_field(field, message)
            name = FORM_FIELD_OF.get(top, top)
            if name in self.fields:
                self.add_error(name, on_top)
            else:
                self.add_error(None, f"{field}: {message}")


def spec_problems(kind: Kind, values: dict[str, Any]) -> dict[str, str]:
    """What is wrong with ``values`` as a spec of ``kind``, field by field, all at once.

    ``values`` holds the fields that could be read; one left out has been
    refused already. Each value is checked by its spec field, then the
    kind's cross-field check runs with an unreadable or refused optional
    field at its default (a required one missing stops it: there is nothing
    to check it against); what it says about such a field is dropped, as the
    field's own problem is said already.
    """
    errors: dict[str, str] = {}
    spec: dict[str, Any] = {"kind": kind.name}
    complete = True
    for field in kind.fields:
        if field.name == "kind":
            continue
        if field.name in values:
            try:
                spec[field.name] = field.clean(values[field.name])
                continue
            except ValueError as exc:
                errors[field.name] = str(exc)
        if field.required:
            complete = False
        else:
            spec[field.name] = copy.deepcopy(field.default)
    if complete:
        for name, message in kind.cross_field_problems(spec).items():
            top, message = on_field(name, message)
            if top in values and top not in errors:
                errors[top] = message
    return errors


def on_field(name: str, message: str) -> tuple[str, str]:
    """Where a problem of ``name`` shows: a key of an object field (a parity run's
    ``b.host``) on that field's box, saying which key."""
    top, _, key = name.partition(".")
    return top, f"{key}: {message}" if key else message


def _form_field(field: Field) -> forms.Field:
    options: dict[str, Any] = {
        "help_text": HELP.get(field.name, field.help),
        "required": field.required,
    }
    if not field.required:
        options["initial"] = field.default
    if field.choices is not None:
        choices = [(choice, choice) for choice in field.choices]
        if field.name == "device_type":
            choices = list(DeviceType.choices)
        if field.required:
            made: forms.Field = forms.ChoiceField(choices=choices, **options)
        else:
            # Not sent at all (a client that posts only what it changes): the default.
            made = forms.TypedChoiceField(choices=choices, empty_value=field.default, **options)
    elif field.type == "integer":
        made = forms.IntegerField(min_value=field.minimum, max_value=field.maximum, **options)
    elif field.type == "number":
        made = forms.FloatField(min_value=field.minimum, max_value=field.maximum, **options)
    elif field.type == "boolean":
        options["required"] = False
        made = forms.BooleanField(**options)
    elif field.type == "strings":
        made = WordsField(**options)
    elif field.type == "env":
        made = EnvField(**options)
    elif field.type == "object":
        options["required"] = False
        made = JsonObjectField(**options)
    elif field.type == "ranks":
        made = RanksField(**options)
    else:
        made = forms.CharField(**options)
    if field.name in EXAMPLES:
        made.widget.attrs["placeholder"] = EXAMPLES[field.name]
    return made


def _timeout_fields(field: Field) -> dict[str, forms.Field]:
    hours, minutes = divmod(int(field.default) // 60, 60)
    max_hours = int(field.maximum // 3600) if field.maximum is not None else None
    return {
        "timeout_hours": forms.IntegerField(
            label="Timeout",
            required=False,
            initial=hours,
            min_value=0,
            max_value=max_hours,
            help_text=field.help + " Empty: the kind's default.",
        ),
        "timeout_minutes": forms.IntegerField(
            label="minutes", required=False, initial=minutes, min_value=0, max_value=59
        ),
    }


def _timeout_s(hours: int | None, minutes: int | None, field: Field) -> int:
    """Hours and minutes as seconds; both empty: the kind's default."""
    if hours is None and minutes is None:
        return field.default
    return ((hours or 0) * 60 + (minutes or 0)) * 60


def _timeout_problem(seconds: int, field: Field) -> str | None:
    """The spec's bounds on the timeout, said in the form's units."""
    if field.minimum is not None and seconds < field.minimum:
        return "The timeout must be at least 1 minute."
    if field.maximum is not None and seconds > field.maximum:
        return f"The timeout must be at most {field.maximum / 3600:g} hours."
    return None


def _entry_fields(field: Field) -> dict[str, forms.Field]:
    choices = [
        (BUILTIN_PREFIX + job, f"{BUILTIN_PREFIX}{job} (built-in job)") for job in BUILTIN_JOBS
    ]
    choices.append((ENTRY_PATH, "a script or module of yours …"))
    if not field.required:
        choices.insert(0, ("", "none"))
    initial = field.default if not field.required else choices[0][0]
    path_initial = ""
    if initial and initial not in dict(choices):
        initial, path_initial = ENTRY_PATH, initial
    entry_path = forms.CharField(
        label="Path or module", required=False, initial=path_initial, help_text=field.help
    )
    entry_path.widget.attrs["placeholder"] = EXAMPLES["entry_path"]
    return {
        ENTRY_FIELD: forms.ChoiceField(
            label="Entry", choices=choices, initial=initial, required=field.required
        ),
        "entry_path": entry_path,
    }


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


class JsonObjectField(forms.CharField):
    """A JSON object typed as text (the profiling window); empty: none (null)."""

    widget = forms.Textarea(attrs={"rows": 2})

    def prepare_value(self, value: Any) -> Any:
        return json.dumps(value) if isinstance(value, dict) else (value or "")

    def to_python(self, value: Any) -> Any:
        if value is None or isinstance(value, dict):
            return value
        text = super().to_python(value).strip()
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError as error:
            raise forms.ValidationError(f"not valid JSON: {error}") from error


class RanksField(forms.CharField):
    """Global ranks typed as ``0, 8`` (or ``all``); the spec's own field then checks them."""

    def prepare_value(self, value: Any) -> Any:
        return ", ".join(str(rank) for rank in value) if isinstance(value, list) else value

    def to_python(self, value: Any) -> Any:
        if isinstance(value, list):
            return value
        text = super().to_python(value).strip()
        if not text:
            return list(DEFAULT_METRIC_RANKS)
        if text == ALL:
            return text
        try:
            return [int(part) for part in text.replace(",", " ").split()]
        except ValueError as error:
            raise forms.ValidationError('ranks such as "0, 8", or "all"') from error


class EnvField(forms.CharField):
    """Environment variables typed one ``KEY=VALUE`` a line; blank lines and ``#`` comments skipped.

    The spec's own field then checks the names (valid, not set by npulab).
    """

    widget = forms.Textarea(attrs={"rows": 3})

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, dict):
            return "\n".join(f"{key}={item}" for key, item in value.items())
        return value

    def to_python(self, value: Any) -> dict[str, str]:
        if isinstance(value, dict):
            return value
        env: dict[str, str] = {}
        problems = []
        for number, line in enumerate(super().to_python(value).splitlines(), start=1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            # Lines pasted from a shell script (the toolkit's set_env.sh) keep working.
            key, equals, item = line.removeprefix("export ").partition("=")
            if not equals or not key.strip():
                problems.append(f"line {number} is not KEY=VALUE: {line[:40]}")
            else:
                env[key.strip()] = _unquoted(item)
        if problems:
            raise forms.ValidationError(problems)
        return env


def _unquoted(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value
