"""A CANN installation's own error-code tables, read where the host has them.

CANN ships its error manager's messages as JSON (``error_info_list`` entries
with ``ErrCode``, ``errTitle``, ``ErrMessage`` and ``suggestion``) under each
toolkit's ``conf/error_manager/``. A code no shipped rule names then still gets
its official text. The host's environment snapshot finds them (its ``ascend``
section's ``error_tables``) and the host worker hands their paths to each run's
supervisor, which reads them; a run by hand looks for them itself. They are never
copied into this repository.
"""

from __future__ import annotations

import glob
import json
import os
from typing import Iterable

from workers.contract.script_env import CANN_ERROR_TABLES

# Where toolkits live: set_env.sh's variables first, then under the install root.
ROOT_VARIABLES = ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH", "ASCEND_OPP_PATH")
INSTALL_ROOT = "/usr/local/Ascend"
TOOLKIT_FOLDERS = ("ascend-toolkit/latest", "cann")
_PATTERNS = (
    "conf/error_manager/*.json",
    "*/conf/error_manager/*.json",
    "../conf/error_manager/*.json",
)
MAX_TABLE_BYTES = 16 * 1024 * 1024


def toolkit_roots(install_root: str = INSTALL_ROOT, environ: dict | None = None) -> list[str]:
    """The folders a toolkit may be in: the environment's, then those under ``install_root``."""
    environ = os.environ if environ is None else environ
    named = [environ[name] for name in ROOT_VARIABLES if environ.get(name)]
    return named + [os.path.join(install_root, folder) for folder in TOOLKIT_FOLDERS]


def find_tables(roots: Iterable[str] | None = None, environ: dict | None = None) -> list[str]:
    """Paths of the error-code JSON files under the toolkit roots (environment, defaults)."""
    if roots is None:
        roots = toolkit_roots(environ=environ)
    found: list[str] = []
    for root in roots:
        for pattern in _PATTERNS:
            for path in sorted(glob.glob(os.path.join(root, pattern))):
                real = os.path.realpath(path)
                if real not in found:
                    found.append(real)
    return found


def load_tables(paths: Iterable[str]) -> dict[str, dict]:
    """code -> {title, message, cause, solution, file}; unreadable files are skipped."""
    tables: dict[str, dict] = {}
    for path in paths:
        try:
            if os.path.getsize(path) > MAX_TABLE_BYTES:
                continue
            with open(path, encoding="utf-8", errors="replace") as handle:
                doc = json.load(handle)
        except (OSError, ValueError):
            continue
        entries = doc.get("error_info_list", []) if isinstance(doc, dict) else []
        for entry in entries:
            if not isinstance(entry, dict) or not entry.get("ErrCode"):
                continue
            suggestion = (
                entry.get("suggestion") if isinstance(entry.get("suggestion"), dict) else {}
            )
            tables.setdefault(
                str(entry["ErrCode"]),
                {
                    "title": str(entry.get("errTitle", "")),
                    "message": str(entry.get("ErrMessage", "")),
                    "cause": str(suggestion.get("Possible Cause", "")),
                    "solution": str(suggestion.get("Solution", "")),
                    "file": path,
                },
            )
    return tables


def installed_tables(environ: dict | None = None) -> dict[str, dict]:
    """The tables the host's snapshot found (``script_env.CANN_ERROR_TABLES``), else those of the
    installation this process can see (empty without CANN)."""
    environ = os.environ if environ is None else environ
    listed = environ.get(CANN_ERROR_TABLES)
    if listed is not None:
        return load_tables(path for path in listed.split(os.pathsep) if path)
    return load_tables(find_tables(environ=environ))
