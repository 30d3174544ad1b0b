"""``npulab submit``: a spec from a file, stdin or the kind's own options; then --wait."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Sequence

import click

from workers.cli import output
from workers.cli.base import complete_host, complete_kind, handled, json_option, state_of
from workers.cli.client import ApiError
from workers.cli.follow import follow_run, wait_options
from workers.contract import exits

# Where a kind's field options put their values: (name) and, for an env field, pairs.
FIELD_PREFIX, ENV_FIELD_PREFIX = "field__", "env_field__"


def _peek_kind(args: Sequence[str]) -> str | None:
    """The value of --kind among raw arguments, before click parses them."""
    for index, arg in enumerate(args):
        if arg == "--":
            return None
        if arg == "--kind" and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith("--kind="):
            return arg.split("=", 1)[1]
    return None


def field_option(field: dict[str, Any], taken: set[str]) -> click.Option | None:
    """A click option for one spec field of a kind, typed as the kind declares it."""
    name = field["name"]
    flag = "--" + name.replace("_", "-")
    if name == "kind" or flag in taken:
        return None  # set through SPEC or --set instead
    help_text = field.get("help") or ""
    if field.get("required"):
        help_text += " [required]"
    elif field.get("default") not in (None, "", [], {}):
        help_text += f" [default: {json.dumps(field['default'])}]"
    dest = FIELD_PREFIX + name
    kind = field.get("type")
    if kind == "boolean":
        return click.Option([f"{flag}/--no-{flag[2:]}", dest], default=None, help=help_text)
    if kind == "strings":
        return click.Option([flag, dest], multiple=True, help=help_text + " (repeatable)")
    if kind == "env":
        return click.Option(
            [flag, ENV_FIELD_PREFIX + name],
            multiple=True,
            metavar="NAME=VALUE",
            help=help_text + " (repeatable)",
        )
    if kind == "object":
        return click.Option(
            [flag, dest], type=JsonObject(), default=None, help=help_text + " (JSON object)"
        )
    if kind == "ranks":
        return click.Option(
            [flag, dest], type=Ranks(), default=None, help=help_text + ' (0,8 or "all")'
        )
    if kind == "integer":
        option_type: Any = click.INT
    elif kind == "number":
        option_type = click.FLOAT
    elif field.get("choices"):
        option_type = click.Choice(field["choices"])
    else:
        option_type = click.STRING
    return click.Option([flag, dest], type=option_type, default=None, help=help_text)


class SubmitCommand(click.Command):
    """``submit``, whose options grow the fields of the kind that ``--kind`` names."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not hasattr(self, "_static_params"):
            self._static_params = list(self.params)
        self.params = list(self._static_params)
        kind = _peek_kind(args)
        if kind:
            asks_help = any(arg in ctx.help_option_names for arg in args)
            self.params += self._kind_options(ctx, kind, quiet=asks_help)
        return super().parse_args(ctx, args)

    def _kind_options(self, ctx: click.Context, kind: str, quiet: bool) -> list[click.Option]:
        try:
            described = state_of(ctx).client.get(f"kinds/{kind}/")
        except ApiError as error:
            # Completing, or --help: the static options rather than an error.
            if ctx.resilient_parsing or quiet:
                return []
            if error.status == 404:
                raise click.BadParameter(error.message, param_hint="--kind") from error
            raise
        taken = {opt for param in self._static_params for opt in getattr(param, "opts", [])}
        taken |= {
            opt for param in self._static_params for opt in getattr(param, "secondary_opts", [])
        }
        built = [field_option(field, taken) for field in described.get("fields", [])]
        return [option for option in built if option is not None]


class JsonObject(click.ParamType):
    """An option typed as a JSON object (the profiling window: ``--profile '{"active": 3}'``)."""

    name = "json"

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, dict):
            return value
        try:
            parsed = json.loads(value)
        except ValueError as exc:
            self.fail(f"not valid JSON: {exc}", param, ctx)
        if not isinstance(parsed, dict):
            self.fail("must be a JSON object", param, ctx)
        return parsed


class Ranks(click.ParamType):
    """An option typed as global ranks: ``--metric-ranks 0,8`` or ``--metric-ranks all``."""

    name = "ranks"

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, list) or value == "all":
            return value
        try:
            return [int(part) for part in str(value).split(",") if part.strip()]
        except ValueError:
            self.fail(f"{value!r}: ranks such as 0,8, or all", param, ctx)


def _json_value(text: str) -> Any:
    """``--set`` values: JSON when they parse (numbers, true, lists), else the string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _pairs(values: Sequence[str], option: str) -> list[tuple[str, str]]:
    pairs = []
    for value in values:
        key, sep, item = value.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{value!r} is not KEY=VALUE", param_hint=option)
        pairs.append((key, item))
    return pairs


def read_spec(source: str) -> dict[str, Any]:
    """A spec document from a file, or from standard input for ``-``."""
    if source == "-":
        text = sys.stdin.read()
    else:
        try:
            text = Path(source).read_text()
        except OSError as error:
            raise click.FileError(source, hint=error.strerror or str(error)) from error
    try:
        doc = json.loads(text)
    except ValueError as error:
        raise click.BadParameter(f"not JSON: {error}", param_hint="SPEC") from error
    if not isinstance(doc, dict):
        raise click.BadParameter("must be a JSON object", param_hint="SPEC")
    return doc


@click.command(
    "submit",
    cls=SubmitCommand,
    context_settings={"ignore_unknown_options": False},
    epilog="With --kind K, `npulab submit --kind K --help` lists K's own options.",
)
@click.argument("spec_file", metavar="[SPEC.json|-]", required=False)
@click.option(
    "--kind", metavar="KIND", shell_complete=complete_kind, help="Build the spec from options."
)
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="FIELD=VALUE",
    help="Set any spec field (VALUE as JSON when it parses); repeatable.",
)
@click.option(
    "--project",
    metavar="SLUG",
    help="Submit to this project (who may see the run, which hosts it may use); "
    "default: the default project.",
)
@click.option("--host", metavar="H", shell_complete=complete_host, help="Run on this host.")
@click.option("--label", "labels", multiple=True, help="The host must carry it; repeatable.")
@click.option("--name", help="A name for the run.")
@click.option("--tag", "tags", multiple=True, help="A tag; repeatable.")
@click.option("--priority", type=click.IntRange(-1000, 1000), help="Higher runs first.")
@click.option(
    "--wait-for-host",
    is_flag=True,
    help="Queue it even if no registered host could take it, until one could or the "
    "queue expiry passes (then it ends expired); without it such a run is refused.",
)
@click.option(
    "--idempotency-key",
    metavar="K",
    help="Submitting the same key again returns the run it made (a retried CI step).",
)
@click.option("--wait", is_flag=True, help="Wait for the run to end; exit with its outcome.")
@wait_options
@json_option
@click.pass_context
@handled
def submit(
    ctx: click.Context,
    spec_file: str | None,
    kind: str | None,
    settings: tuple[str, ...],
    project: str | None,
    host: str | None,
    labels: tuple[str, ...],
    name: str | None,
    tags: tuple[str, ...],
    priority: int | None,
    wait_for_host: bool,
    idempotency_key: str | None,
    wait: bool,
    timeout: float | None,
    follow: bool,
    log_lines: int,
    quiet: bool,
    junit_path: str | None,
    **field_values: Any,
) -> int:
    """Queue a run from SPEC.json (- for stdin) or from --kind and its options; print its URL.

    \b
    npulab submit smoke.json --wait
    npulab submit --kind smoke --device-type npu --devices 1 --wait --junit smoke.xml
    """
    state = state_of(ctx)
    doc = read_spec(spec_file) if spec_file else {}
    if kind:
        if doc.get("kind") not in (None, kind):
            raise click.BadParameter(f"SPEC is a {doc['kind']} run", param_hint="--kind")
        doc["kind"] = kind
    if "kind" not in doc:
        raise click.UsageError("give a SPEC file or --kind (npulab kinds list names them)")
    for key, value in field_values.items():
        if value is None or value == ():
            continue
        if key.startswith(ENV_FIELD_PREFIX):
            field = key[len(ENV_FIELD_PREFIX) :]
            flag = "--" + field.replace("_", "-")
            doc[field] = {**(doc.get(field) or {}), **dict(_pairs(value, flag))}
        else:
            field = key[len(FIELD_PREFIX) :]
            doc[field] = list(value) if isinstance(value, tuple) else value
    for field, text in _pairs(settings, "--set"):
        doc[field] = _json_value(text)
    queueing = {"project": project, "host": host, "name": name, "priority": priority}
    doc.update({key: value for key, value in queueing.items() if value is not None})
    if wait_for_host:
        doc["wait_for_host"] = True
    if labels:
        doc["labels"] = list(labels)
    if tags:
        doc["tags"] = list(tags)

    client = state.client
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
    # Only with a key is a retried POST harmless: the server returns the run it made.
    response = client.post("runs/", doc, headers=headers, retry=bool(idempotency_key))
    run = response.json()
    created = response.status_code == 201
    if not wait:
        if state.json:
            output.emit_json({"run": run, "created": created})
        else:
            click.echo(run.get("web_url") or run.get("url"))
        return exits.CLI_SUCCEEDED
    if not state.json:
        # The URL first, flushed: a CI log shows where to look while it waits.
        click.echo(run.get("web_url") or run.get("url"))
        sys.stdout.flush()
    return follow_run(state, int(run["id"]), timeout, follow, log_lines, quiet, junit_path, created)
