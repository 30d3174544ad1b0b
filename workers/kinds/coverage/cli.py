"""Coverage runs in ``--junit`` reports: one case per op × dtype (× pass), read page by page.

A cell that passes is a passed case (a CPU fallback too: it ran, and its
warning is kept in the case's output); ``unsupported`` is skipped, a known
gap rather than a broken kernel; mismatch, error, crash and timeout fail.
A pipeline that gates on what changed since a known-good stack uses the
comparison's own JUnit instead (docs/coverage.md).
"""

from __future__ import annotations

import json
from typing import Any

from workers.cli.junit import FAILURE, PASSED, SKIPPED, Case, Fetch, case_builder
from workers.kinds.coverage import FALLBACK, FORWARD, PASS, UNSUPPORTED

PAGE = 1000


def _outcome(status: str) -> str:
    if status in (PASS, FALLBACK):
        return PASSED
    return SKIPPED if status == UNSUPPORTED else FAILURE


@case_builder("coverage")
def coverage_cases(run: dict[str, Any], fetch: Fetch) -> list[Case]:
    cases = []
    offset = 0
    while True:
        page = fetch(f"runs/{run['id']}/coverage/", limit=PAGE, offset=offset)
        results = page.get("results") or []
        for result in results:
            op = result["op"] + (f".{result['variant']}" if result.get("variant") else "")
            name = f"{op} {result['dtype']}"
            if result.get("pass", FORWARD) != FORWARD:
                name += f" {result['pass']}"
            status = str(result.get("status"))
            detail = result.get("detail") or {}
            cases.append(
                Case(
                    name=name,
                    classname=f"npulab.coverage.{result.get('family') or 'torch'}",
                    time=float(result.get("seconds") or 0.0),
                    outcome=_outcome(status),
                    message=str(result.get("error") or status),
                    type=status,
                    text=str(result.get("error") or ""),
                    system_out=json.dumps(detail, sort_keys=True) if detail else "",
                )
            )
        offset += len(results)
        if not results or not page.get("next"):
            return cases
