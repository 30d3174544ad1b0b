"""What every ``npulab`` command shares: the state the root group sets, errors, --json.

The commands live in ``submit``, ``browse`` and ``gates``; ``main`` joins them
into the ``npulab`` group.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import click

from workers.cli import output
from workers.cli.client import ApiError, Client, describe_error_body, resolve


class State:
    """What the group's options decide for every command: where, who, and how to print."""

    def __init__(self, url: str | None = None, as_json: bool = False) -> None:
        self.url_option = url
        self.json = as_json
        self._client: Client | None = None

    @property
    def client(self) -> Client:
        if self._client is None:
            url, token = resolve(self.url_option)
            self._client = Client(url, token)
            ctx = click.get_current_context(silent=True)
            if ctx is not None:
                # A kept-alive connection would hold a server thread (and its database
                # connection) until the process ends; in tests, that is the whole run.
                ctx.find_root().call_on_close(self._client.close)
        return self._client


def state_of(ctx: click.Context) -> State:
    state = ctx.find_object(State)
    if state is None:
        # Completion parses without running the group's callback.
        root = ctx.find_root()
        state = State(root.params.get("url"))
        root.obj = state
    return state


def report_error(state: State | None, error: ApiError) -> int:
    """Say what went wrong, for people on stderr and for --json on stdout too."""
    if state is not None and state.json:
        output.emit_json(error.as_dict())
    lines = describe_error_body(error.body) if error.status == 400 else []
    prefix = output.styled("error: ", "red", bold=True)
    if len(lines) > 1:
        click.echo(prefix + "invalid input", err=True)
        for line in lines:
            click.echo("  " + line, err=True)
    else:
        click.echo(prefix + error.message, err=True)
    return error.exit_code


def handled(function: Callable[..., Any]) -> Callable[..., Any]:
    """Run a command; an ApiError becomes its message and its exit code."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        try:
            return function(*args, **kwargs)
        except ApiError as error:
            ctx.exit(report_error(state_of(ctx), error))

    return wrapper


def _set_json(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        state_of(ctx).json = True


json_option = click.option(
    "--json",
    "as_json",
    is_flag=True,
    expose_value=False,
    callback=_set_json,
    help="Print JSON for scripts instead of text.",
)


def complete_kind(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of a kind name, from the platform (nothing when it cannot be read)."""
    try:
        listed = state_of(ctx).client.get("kinds/")
    except ApiError:
        return []
    return [k["name"] for k in listed if str(k.get("name", "")).startswith(incomplete)]


def complete_host(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    try:
        listed = state_of(ctx).client.get("hosts/", limit=200).get("results", [])
    except ApiError:
        return []
    return [h["name"] for h in listed if str(h.get("name", "")).startswith(incomplete)]
