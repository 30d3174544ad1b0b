"""The test-only kind's part of the CLI: ``npulab echo-words RUN``, and a JUnit case per word.

Found beside its declaration (``workers.cli.kinds``), as a site's kind's would be; the
CLI names it nowhere.
"""

from __future__ import annotations

from typing import Any

import click

from workers.cli import output
from workers.cli.base import handled, json_option, state_of
from workers.cli.junit import Case, Fetch, case_builder
from workers.contract import exits


@click.command("echo-words")
@click.argument("run_id", type=int, metavar="RUN")
@json_option
@click.pass_context
@handled
def echo_words(ctx: click.Context, run_id: int) -> int:
    """The words an echo run echoed, one a line."""
    state = state_of(ctx)
    words = state.client.get(f"runs/{run_id}/echo/")
    if state.json:
        output.emit_json(words)
    else:
        for word in words:
            click.echo(word["word"])
    return exits.CLI_SUCCEEDED


@case_builder("echo")
def echo_cases(run: dict[str, Any], fetch: Fetch) -> list[Case]:
    return [
        Case(name=f"word {word['index']}", classname="npulab.echo", system_out=word["word"])
        for word in fetch(f"runs/{run['id']}/echo/")
    ]


COMMANDS = [echo_words]
