"""What kinds add to the CLI: the ``cli`` module beside a kind's declaration.

A kind that needs more than the generic commands keeps its part of the CLI in
its own folder, ``<declaring package>.cli`` (``workers/kinds/parity/cli.py``,
or a site's kind named in ``NPULAB_KINDS``): ``COMMANDS``, the click commands
it adds (``npulab parity``), and the JUnit case builders it registers on import
(``@case_builder("coverage")``). This module finds them from the kinds'
registry, the way ``npulab.extensions`` mounts the kinds' web apps, so the CLI
names no kind. A kind's ``cli`` module speaks REST through ``workers.cli`` like
the rest of the CLI, and imports nothing of its kind's runner.
"""

from __future__ import annotations

import importlib
from importlib.util import find_spec
from types import ModuleType

import click

from workers.contract import kinds as contract_kinds

MODULE = "cli"


def _exists(module: str) -> bool:
    try:
        return find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def kind_modules() -> list[ModuleType]:
    """The ``cli`` module of every kind that has one, in the kinds' name order."""
    names = [f"{kind.module}.{MODULE}" for kind in contract_kinds.all_kinds() if kind.module]
    return [importlib.import_module(name) for name in names if _exists(name)]


def mount(group: click.Group) -> None:
    """Add each kind's commands to ``group``; a name taken twice is a kind's mistake.

    A kind that cannot be loaded here (``NPULAB_KINDS`` naming a site's package this
    machine lacks) costs its own commands only: the others still work.
    """
    for module_name, problem in contract_kinds.load(strict=False).items():
        click.echo(
            f"npulab: the commands of kind {module_name} are not loaded: {problem}", err=True
        )
    for module in kind_modules():
        for command in getattr(module, "COMMANDS", ()):
            if command.name in group.commands:
                raise RuntimeError(
                    f"{module.__name__} adds the command {command.name!r}, which is taken"
                )
            group.add_command(command)
