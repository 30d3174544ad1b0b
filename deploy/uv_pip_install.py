"""``uv pip install`` into the interpreter that runs this, under this machine's pip settings.

Usage: ``VENV/bin/python deploy/uv_pip_install.py UV REQUIREMENT...``

The Makefile installs its environments with uv, which unpacks and compiles in parallel:
a fresh clone's environments take about a third of pip's time (docs/ci.md). uv does not
read pip's configuration, and a machine's pip may point at a mirror, a proxy's CA bundle or
a directory of local wheels, such as a CPU build of torch where PyPI's is a CUDA build of
several GB. So pip's settings, as ``pip config list`` reports them, become uv's arguments;
uv's own (``UV_*``) still apply on top.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys

# pip's option -> uv's, for the options that take a list (whitespace-separated in pip's
# configuration) or a single value.
_LISTS = {
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraints",
    "trusted-host": "--allow-insecure-host",
}
_SINGLE = {"index-url": "--index-url"}
# Environment variables uv reads for what pip takes as options.
_ENVIRONMENT = {"cert": "SSL_CERT_FILE", "proxy": "ALL_PROXY"}
# Later wins: pip's own order (a file's [install] over its [global], the environment over
# every file).
_SCOPES = ("global", "install", ":env:")
_TRUE = {"1", "true", "yes", "on"}


def pip_settings(listing: str) -> dict[str, str]:
    """The settings of ``pip config list`` that apply to ``pip install``, by option."""
    scoped: dict[str, dict[str, str]] = {scope: {} for scope in _SCOPES}
    for line in listing.splitlines():
        name, sep, value = line.partition("=")
        scope, dot, option = name.rpartition(".")
        if sep and dot and scope in scoped:
            # pip prints each value as a Python literal (its repr).
            scoped[scope][option] = str(ast.literal_eval(value))
    merged: dict[str, str] = {}
    for scope in _SCOPES:
        merged.update(scoped[scope])
    return merged


def uv_options(settings: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """uv's arguments and environment for pip's settings."""
    arguments: list[str] = []
    for option, flag in _SINGLE.items():
        if settings.get(option):
            arguments += [flag, settings[option]]
    for option, flag in _LISTS.items():
        for value in settings.get(option, "").split():
            arguments += [flag, value]
    if settings.get("no-index", "").lower() in _TRUE:
        arguments.append("--no-index")
    environment = {
        variable: settings[option]
        for option, variable in _ENVIRONMENT.items()
        if settings.get(option) and variable not in os.environ
    }
    return arguments, environment


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        sys.stderr.write("usage: python deploy/uv_pip_install.py UV REQUIREMENT...\n")
        return 2
    uv, requirements = argv[0], argv[1:]
    listing = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    arguments, environment = uv_options(pip_settings(listing))
    command = [
        uv,
        "pip",
        "install",
        "--quiet",
        "--python",
        sys.executable,
        # The runs' users cannot write bytecode into the environment: without it each run
        # would compile torch again as it imports it.
        "--compile-bytecode",
        # pip takes the best version any index offers; uv's default takes the first index
        # that has the package, and a mirror listed first may hold an older release.
        "--index-strategy",
        "unsafe-best-match",
        *arguments,
        *requirements,
    ]
    return subprocess.run(command, env={**os.environ, **environment}, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
