"""What a spec's ``entry`` may name: a script, a function, or a built-in job.

Training runs an entry; a coverage run of op set ``model`` records the ops
one calls. Both accept the same three forms, checked here once.
"""

from __future__ import annotations

import re

BUILTIN_PREFIX = "builtin:"
# The jobs of workers/training/builtin.py, as ``builtin:<job>``.
BUILTIN_JOBS = ("cnn", "lm")
_MODULE_ENTRY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def check_entry(entry: str) -> str | None:
    """A script path, ``package.module:function`` or ``builtin:<job>``."""
    if entry.startswith(BUILTIN_PREFIX):
        job = entry[len(BUILTIN_PREFIX) :]
        return None if job in BUILTIN_JOBS else "builtin jobs: " + ", ".join(BUILTIN_JOBS)
    if entry.endswith(".py") or _MODULE_ENTRY.match(entry):
        return None
    return "must be a script path ending in .py, package.module:function or builtin:<job>"
