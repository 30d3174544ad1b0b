"""Why a run failed, in Ascend's own codes (docs/diagnosis.md).

Host side, standard library only, Python 3.8 (the supervisor runs it in the user's
interpreter): the knowledge base (``rules`` and its JSON files), the streaming
``scanner``, the ``ranking`` to one root cause, the CANN installation's own error
tables (``cann_tables``), training-health ``findings``, and what the host collects
on failure (``collect``). ``npulab diagnose`` is the same code, offline.
"""

from __future__ import annotations

from typing import Sequence

from workers.diagnosis.ranking import diagnose, root_cause
from workers.diagnosis.scanner import Scanner


def diagnose_paths(
    paths: Sequence[str], tables: dict[str, dict] | None = None, findings: Sequence[dict] = ()
) -> dict:
    """``npulab diagnose --json``'s document for log files, plog directories or bundles."""
    if tables is None:
        from workers.diagnosis.cann_tables import installed_tables

        tables = installed_tables()
    scanner = Scanner(tables=tables)
    for path in paths:
        scanner.scan_path(path)
    found = diagnose(scanner.hits, findings)
    return {
        "root_cause": root_cause(found),
        "findings": list(findings),
        "evidence": found["evidence"] if found else [],
        "ranks": found["ranks"] if found else None,
        "files": list(scanner.files),
    }


__all__: list[str] = ["Scanner", "diagnose", "diagnose_paths", "root_cause"]
