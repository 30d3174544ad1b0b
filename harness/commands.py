"""Several management commands in one Django start-up, each one's output kept apart.

``manage_each`` runs ``python -m harness.commands '[["api_token", "e2e"], ["host_token", "x"]]'``,
a JSON list of the commands' outputs, in order. Each ``manage.py`` is a Django start-up,
1 to 2 CPU-s and seconds of wall on a loaded 2-core machine: a stack's launch ran three
(migrate, createsuperuser, then its tokens two more) where one does.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Sequence

# A fresh database's migrations take minutes on a loaded 2-core machine.
TIMEOUT_S = 600


def manage_each(env: dict[str, str], *commands: Sequence[str]) -> list[str]:
    """Each of ``commands`` (a management command and its arguments) in one Django
    start-up, in a process with ``env``: their outputs, in order."""
    done = subprocess.run(
        [sys.executable, "-m", "harness.commands", json.dumps([list(c) for c in commands])],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    if done.returncode != 0:
        raise RuntimeError(f"management commands {commands} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> None:
    commands = json.loads(argv[1])
    import django
    from django.core.management import call_command

    django.setup()
    outputs = []
    for name, *args in commands:
        output = io.StringIO()
        call_command(name, *args, stdout=output)
        outputs.append(output.getvalue().strip())
    json.dump(outputs, sys.stdout)


if __name__ == "__main__":
    main(sys.argv)
