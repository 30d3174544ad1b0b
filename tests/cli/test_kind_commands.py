"""The kinds' own commands come from the registry; a kind that cannot load costs its own."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.paths import REPO_DIR


def npulab_help(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workers.cli", "--help"],
        cwd=REPO_DIR,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_kinds_command_is_listed_from_its_folder() -> None:
    shown = npulab_help(NPULAB_KINDS="tests.kinds.echo")
    assert shown.returncode == 0, shown.stderr
    commands = [line.split()[0] for line in shown.stdout.split("Commands:")[1].splitlines() if line]
    assert {"parity", "echo-words", "submit"} <= set(commands)


def test_a_kind_that_cannot_load_costs_only_its_own_commands() -> None:
    shown = npulab_help(NPULAB_KINDS="mysite.kinds.missing,tests.kinds.echo")
    assert shown.returncode == 0
    assert (
        "the commands of kind mysite.kinds.missing are not loaded: No module named 'mysite'"
        in shown.stderr
    )
    commands = [line.split()[0] for line in shown.stdout.split("Commands:")[1].splitlines() if line]
    assert {"submit", "parity", "echo-words"} <= set(commands)
