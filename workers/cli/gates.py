"""What pipelines gate on besides a run: ``npulab review`` and ``npulab compare``."""

from __future__ import annotations

from typing import Any

import click

from workers.cli import junit, output
from workers.cli.base import complete_host, handled, json_option, state_of
from workers.contract import exits

REVIEW_ORDER = {"go": 0, "caution": 1, "no-go": 2}


def _plan(text: str) -> dict[str, str]:
    planned = {}
    for part in text.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep or not key or not value:
            raise click.BadParameter(f"{part!r} is not NAME=VERSION", param_hint="--plan")
        planned[key.strip()] = value.strip()
    return planned


@click.command()
@click.option("--host", required=True, shell_complete=complete_host, help="The host to upgrade.")
@click.option("--target", type=int, metavar="SNAPSHOT", help="Move to this snapshot's environment.")
@click.option(
    "--plan",
    metavar="cann=V,torch_npu=V,...",
    help="Or planned versions: cann, torch_npu, torch, python.",
)
@click.option(
    "--fail-on",
    type=click.Choice(["no-go", "caution"]),
    help="Exit 1 when the verdict is this or worse.",
)
@json_option
@click.pass_context
@handled
def review(
    ctx: click.Context, host: str, target: int | None, plan: str | None, fail_on: str | None
) -> int:
    """Go / no-go for upgrading HOST to a target snapshot or planned versions, and why."""
    if (target is None) == (plan is None):
        raise click.UsageError("give --target SNAPSHOT or --plan cann=...,torch_npu=..., one")
    params: dict[str, Any] = {"target": target} if target is not None else _plan(plan or "")
    state = state_of(ctx)
    result = state.client.get(f"hosts/{host}/upgrade-review/", **params)
    decision = str(result.get("decision"))
    failed = fail_on is not None and REVIEW_ORDER.get(decision, 2) >= REVIEW_ORDER[fail_on]
    code = exits.CLI_JOB_FAILED if failed else exits.CLI_SUCCEEDED
    if state.json:
        output.emit_json(result)
        return code
    click.echo(
        f"{host}: {output.styled(decision.upper(), output.STATUS_COLOURS.get(decision), True)}"
    )
    for reason in result.get("reasons", []):
        click.echo(f"  - {reason}")
    verdict = (result.get("compatibility") or {}).get("verdict")
    if verdict:
        click.echo(f"compatibility: {output.status(verdict)}")
    rows = []
    for row in result.get("outcomes", []):
        now, then = row.get("current") or {}, row.get("target") or {}
        rows.append(
            {
                "kind": row.get("kind"),
                "key": "runs (succeeded)",
                "current": f"{now.get('runs', 0)} ({now.get('succeeded', 0)})",
                "target": f"{then.get('runs', 0)} ({then.get('succeeded', 0)})" if then else "",
            }
        )
        for delta in row.get("deltas", []):
            rows.append(
                {
                    "kind": row.get("kind"),
                    "key": delta.get("key"),
                    "current": delta.get("current"),
                    "target": delta.get("target"),
                    "change": output.percent(delta.get("change")),
                    "worse": "worse" if delta.get("worse") else "",
                }
            )
    if rows:
        click.echo()
        columns = [
            ("kind", "kind"),
            ("key", "number"),
            ("current", "current"),
            ("target", "target"),
            ("change", "change"),
            ("worse", ""),
        ]
        click.echo(output.table(rows, columns, colour={"worse": lambda t: output.styled(t, "red")}))
    return code


# -- compare --------------------------------------------------------------------


@click.command()
@click.argument("baseline", type=int, metavar="RUN_A")
@click.argument("candidate", type=int, metavar="RUN_B")
@click.option(
    "--threshold",
    type=click.FloatRange(min=0),
    metavar="X",
    help="Relative change that counts as a regression (the platform's default otherwise).",
)
@click.option(
    "--fail-on",
    type=click.Choice(["regressions"]),
    help="Exit 1 when RUN_B regressed against RUN_A.",
)
@click.option(
    "--junit",
    "junit_path",
    type=click.Path(dir_okay=False, writable=True),
    metavar="FILE",
    help="Write a JUnit XML report: one test case per compared number.",
)
@json_option
@click.pass_context
@handled
def compare(
    ctx: click.Context,
    baseline: int,
    candidate: int,
    threshold: float | None,
    fail_on: str | None,
    junit_path: str | None,
) -> int:
    """Compare RUN_B (the candidate) against RUN_A (the baseline), two runs of one kind."""
    state = state_of(ctx)
    body = state.client.get(
        "runs/compare/", baseline=baseline, candidate=candidate, threshold=threshold
    )
    regressions = int(body.get("regressions") or 0)
    code = exits.CLI_JOB_FAILED if fail_on and regressions > 0 else exits.CLI_SUCCEEDED
    if junit_path:
        junit.write(junit_path, [junit.compare_suite(body)])
    if state.json:
        output.emit_json(body)
        return code
    a, b = body.get("baseline") or {}, body.get("candidate") or {}
    header = (
        f"{body.get('kind')}: run {a.get('id')} ({output.status(a.get('status'))}) → "
        f"run {b.get('id')} ({output.status(b.get('status'))})"
    )
    if body.get("threshold") is not None:
        header += f", threshold {float(body['threshold']):.0%}"
    click.echo(header)
    rows = [
        dict(
            row,
            change=output.percent(row.get("change")),
            # Which way is better says something only of numbers, not of a status.
            better=("lower" if row.get("lower_is_better") else "higher")
            if isinstance(row.get("baseline"), (int, float))
            or isinstance(row.get("candidate"), (int, float))
            else "",
            verdict="REGRESSION" if row.get("regression") else "ok",
        )
        for row in body.get("comparisons", [])
    ]
    columns = [
        ("name", "name"),
        ("baseline", "baseline"),
        ("candidate", "candidate"),
        ("change", "change"),
        ("better", "better"),
        ("verdict", ""),
    ]
    verdict_colour = {
        "verdict": lambda t: output.styled(t, "red" if t == "REGRESSION" else "green")
    }
    click.echo(output.table(rows, columns, colour=verdict_colour))
    click.echo(f"{regressions} regression{'s' if regressions != 1 else ''}")
    return code
