"""``npulab diagnose PATH...``: a failed run's root cause from its logs, offline.

No platform and no token: it reads log files, a plog directory (a run's
``ascend_log/``) or a support bundle, and prints the root cause in Ascend's own
codes. It exits 0 when a root cause is found, 1 when nothing known matches (and
2 on bad usage). ``npulab bundle RUN_ID`` downloads a run's support bundle from the
platform (docs/diagnosis.md).
"""

from __future__ import annotations

import json
import os
from typing import Any

import click

from workers.cli import output
from workers.cli.base import handled, json_option, state_of
from workers.diagnosis import diagnose_paths

DIAGNOSED, NOTHING_KNOWN = 0, 1


@click.command("diagnose")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of text.")
@click.pass_context
def diagnose(ctx: click.Context, paths: tuple[str, ...], as_json: bool) -> int:
    """Name the root cause of a failure from log files, a plog directory or a support bundle.

    Exit 0 when a root cause is found, 1 when nothing known matches.
    """
    as_json = as_json or state_of(ctx).json
    found = diagnose_paths(list(paths))
    if as_json:
        click.echo(json.dumps(found, indent=2, ensure_ascii=False))
    else:
        click.echo(describe(found))
    return DIAGNOSED if found["root_cause"] is not None else NOTHING_KNOWN


def describe(found: dict[str, Any]) -> str:
    """The offline result for people."""
    root = found["root_cause"]
    lines = []
    if root is None:
        lines.append("no known root cause in these logs")
    else:
        lines.append(
            output.fields(
                [
                    ("category", output.styled(root["category"], "red", bold=True)),
                    ("codes", ", ".join(root["codes"])),
                    ("blame", root["blame"]),
                    ("line", root["line"]),
                    ("fix", root["fix"]),
                    ("rule", root["rule"]),
                ]
            )
        )
        ranks = found.get("ranks")
        if ranks and ranks.get("first_failed") is not None:
            waited = ", ".join(str(rank) for rank in ranks.get("timed_out", [])) or "none"
            lines.append(f"first failing rank: {ranks['first_failed']}; only timed out: {waited}")
        lines.append("evidence:")
        for item in found.get("evidence", []):
            lines.append(f"  {item['file']}:{item['line_no']}: {item['text']}")
    for finding in found.get("findings", []):
        lines.append(f"finding: {finding['name']}: {finding['message']}")
    return "\n".join(lines)


def diagnosis_lines(diagnosis: dict[str, Any] | None) -> list[tuple[str, Any]]:
    """The fields ``npulab runs show`` adds for a run's diagnosis."""
    if not diagnosis:
        return []
    first = (diagnosis.get("evidence") or [{}])[0]
    return [
        (
            "diagnosis",
            output.styled(diagnosis.get("category", ""), "red", bold=True)
            + (f" ({', '.join(diagnosis.get('codes') or [])})" if diagnosis.get("codes") else ""),
        ),
        ("blame", diagnosis.get("blame")),
        ("fix", diagnosis.get("fix")),
        (
            "evidence",
            f"{first.get('file', '')}:{first.get('line_no', '')}: {first.get('text', '')}",
        ),
    ]


@click.command("bundle")
@click.argument("run_id", type=int)
@click.option(
    "-o",
    "--output",
    "target",
    type=click.Path(dir_okay=False, writable=True),
    help="Where to write it (default: npulab-run-RUN_ID-bundle.tar.gz here).",
)
@json_option
@click.pass_context
@handled
def bundle(ctx: click.Context, run_id: int, target: str | None) -> None:
    """Download a run's support bundle: spec, snapshot, diagnosis, logs, plogs, host health
    and telemetry around the failure, secrets redacted; one archive for a vendor ticket."""
    state = state_of(ctx)
    response = state.client.request("GET", f"runs/{run_id}/bundle/")
    path = target or f"npulab-run-{run_id}-bundle.tar.gz"
    temporary = path + ".part"
    with open(temporary, "wb") as handle:
        handle.write(response.content)
    os.replace(temporary, path)
    if state.json:
        output.emit_json(
            {"run": run_id, "bundle": os.path.abspath(path), "bytes": len(response.content)}
        )
    else:
        click.echo(f"bundle of run {run_id} written to {path} ({len(response.content)} bytes)")
