"""``npulab``: submit runs, follow them and gate CI on them, over the REST API alone.

The commands, their ``--help`` and shell completion (``_NPULAB_COMPLETE``)
come from the click definitions (here, in ``submit``, ``browse``, ``gates``, and
in the kinds' own ``cli`` modules, ``workers.cli.kinds``);
``submit --kind K`` adds an option for each spec field of kind K as
``GET /api/v1/kinds/K/`` declares it, so the CLI never keeps a list of fields.
Exit codes are the contract's (``workers.contract.exits``, docs/cli.md).
"""

from __future__ import annotations

import sys
from typing import Any, Sequence

import click

from workers.cli import browse, diagnose, gates, kinds, output, submit
from workers.cli.base import State, handled, json_option, report_error, state_of
from workers.cli.client import (
    DEFAULT_URL,
    TOKEN_ENV,
    URL_ENV,
    ApiError,
    Client,
    config_path,
    read_config,
    resolve,
    write_config,
)
from workers.contract import exits

# Ctrl-C: the shell's convention, outside the documented gate codes.
INTERRUPTED = 130


class NpulabGroup(click.Group):
    """The root group: maps every way out to the documented exit codes."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            code = super().main(
                args=args,
                prog_name=prog_name or "npulab",
                complete_var=complete_var,
                standalone_mode=False,
                **extra,
            )
        except click.ClickException as error:
            # Bad options or arguments, an unreadable file: nothing was done.
            error.show()
            code = exits.CLI_USAGE
        except ApiError as error:
            # Raised while the options were being built (submit --kind's fields).
            code = report_error(None, error)
        except click.Abort:
            click.echo("interrupted", err=True)
            code = INTERRUPTED
        if not isinstance(code, int):
            code = exits.CLI_SUCCEEDED
        if standalone_mode:
            sys.exit(code)
        return code


# What each exit code means, for --help (and docs/cli.md says the same).
EXIT_CODES = [
    (exits.CLI_SUCCEEDED, "succeeded"),
    (exits.CLI_JOB_FAILED, "the job failed (its code, its data, its spec)"),
    (exits.CLI_USAGE, "invalid input or usage: nothing was done"),
    (exits.CLI_INFRASTRUCTURE, "infrastructure failure (safe to retry)"),
    (exits.CLI_GAVE_UP, "gave up waiting (--timeout); the run goes on"),
    (exits.CLI_CANCELLED, "cancelled"),
    (exits.CLI_UNREACHABLE, "could not reach the platform, or not authorised"),
    (exits.CLI_STACK_FAILED, "the stack failed (CANN, driver, torch_npu), not the script"),
]
HELP = (
    "Submit runs to npulab, follow them, and gate CI pipelines on how they end.\n\n"
    f"The platform is --url or ${URL_ENV}; the token ${TOKEN_ENV} or the file that "
    "`npulab login` writes.\n\n"
    "\b\nExit codes:\n" + "\n".join(f"  {code}  {meaning}" for code, meaning in EXIT_CODES)
)


@click.group(
    "npulab",
    cls=NpulabGroup,
    help=HELP,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "--url",
    envvar=URL_ENV,
    metavar="URL",
    help=f"The platform, e.g. https://npulab.example.org (${URL_ENV}; else the config file; "
    f"else {DEFAULT_URL}).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of text.")
@click.version_option(package_name="npulab", prog_name="npulab")
@click.pass_context
def cli(ctx: click.Context, url: str | None, as_json: bool) -> None:
    # The help text is HELP, built from the contract's exit codes.
    state = ctx.ensure_object(State)
    state.url_option = url
    state.json = state.json or as_json


# -- login ----------------------------------------------------------------------


@cli.command()
@click.option("--url", "login_url", metavar="URL", help="The platform to log in to.")
@click.option(
    "--token-stdin", is_flag=True, help="Read the token from standard input instead of a prompt."
)
@json_option
@click.pass_context
@handled
def login(ctx: click.Context, login_url: str | None, token_stdin: bool) -> None:
    """Check a token against the platform and keep it in the config file (mode 0600).

    Make a token with `manage.py api_token USER` or on the API tokens page (/account/tokens/).
    """
    state = state_of(ctx)
    url = (login_url or state.url_option or resolve()[0]).rstrip("/")
    if token_stdin:
        token = sys.stdin.readline().strip()
    else:
        token = click.prompt("API token", hide_input=True).strip()
    if not token:
        raise click.UsageError("no token given")
    checker = Client(url, token)
    try:
        checker.get("kinds/")  # any user endpoint: 401/403 say the token is no good
    finally:
        checker.close()
    config = read_config()
    config.update(url=url, token=token)
    path = write_config(config)
    if state.json:
        output.emit_json({"url": url, "config": str(path)})
    else:
        click.echo(f"logged in to {url}; token kept in {path}")


@cli.command()
@json_option
@click.pass_context
@handled
def logout(ctx: click.Context) -> None:
    """Forget the token kept by `npulab login`."""
    config = read_config()
    had = config.pop("token", None) is not None
    if had:
        write_config(config)
    if state_of(ctx).json:
        output.emit_json({"config": str(config_path()), "removed": had})
    else:
        click.echo(f"token removed from {config_path()}" if had else "no token was kept")


cli.add_command(submit.submit)
for group in (browse.runs_group, browse.hosts_group, browse.kinds_group, browse.snapshot_group):
    cli.add_command(group)
cli.add_command(gates.review)
cli.add_command(gates.compare)
cli.add_command(diagnose.diagnose)
cli.add_command(diagnose.bundle)
# The kinds' own commands and JUnit cases (``npulab parity``, coverage's cases).
kinds.mount(cli)


def main() -> None:
    """The console script."""
    cli.main(prog_name="npulab")
