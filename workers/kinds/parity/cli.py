"""``npulab parity RUN``: a parity run's verdict, its first divergent layer, and a gate.

Exit 1 when a threshold breaks: the run's own (its spec's, or its dtype's defaults), or
those given here, which re-judge every stored layer (a stricter gate for one pipeline).
"""

from __future__ import annotations

import math
from typing import Any

import click

from workers.cli import output
from workers.cli.base import handled, json_option, state_of
from workers.contract import exits

PAGE = 1000
NUMBER = ("cosine", "max_abs_err", "max_rel_err", "one_thousandth_ratio")


def _layers(client: Any, run_id: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    while True:
        page = client.get(f"runs/{run_id}/parity/", limit=PAGE, offset=len(rows))
        rows += page.get("layers") or []
        if not page.get("layers") or not page.get("next"):
            return rows


def rejudge(
    rows: list[dict[str, Any]],
    cosine_min: float | None,
    max_rel_err: float | None,
    thousandth_ratio_min: float | None,
) -> dict[str, Any] | None:
    """The first row, in execution order, that breaks these thresholds (or broke a shape,
    NaN or missing check, which no threshold lifts), with what it breaks."""
    for row in rows:
        broken = [name for name in row.get("broken", []) if name in ("shape", "nan", "missing")]
        cosine, rel, ratio = (
            row.get("cosine"),
            row.get("max_rel_err"),
            row.get("one_thousandth_ratio"),
        )
        if cosine_min is not None and cosine is not None and cosine < cosine_min:
            broken.append("cosine")
        if max_rel_err is not None and rel is not None and rel > max_rel_err:
            broken.append("max_rel_err")
        if thousandth_ratio_min is not None and ratio is not None and ratio < thousandth_ratio_min:
            broken.append("thousandth_ratio")
        if broken:
            return dict(row, broken=broken)
    return None


@click.command()
@click.argument("run_id", type=int, metavar="RUN")
@click.option("--cosine-min", type=click.FloatRange(0, 1), help="Re-judge: cosine at least.")
@click.option("--max-rel-err", type=click.FloatRange(0), help="Re-judge: max rel. error at most.")
@click.option(
    "--thousandth-ratio-min", type=click.FloatRange(0, 1), help="Re-judge: 1‰ ratio at least."
)
@click.option(
    "--against",
    type=int,
    metavar="RUN",
    help="Loss-curve parity of RUN (side B) against this run (side A), of any kind.",
)
@click.option("--key", default="loss", show_default=True, help="With --against: the metric.")
@click.option(
    "--rtol", type=click.FloatRange(0), default=1e-4, show_default=True, help="With --against."
)
@json_option
@click.pass_context
@handled
def parity(
    ctx: click.Context,
    run_id: int,
    cosine_min: float | None,
    max_rel_err: float | None,
    thousandth_ratio_min: float | None,
    against: int | None,
    key: str,
    rtol: float,
) -> int:
    """A parity run's first divergent layer and loss parity; exit 1 when a threshold breaks.

    With --against, the loss curves of two runs that exist, with no new run."""
    state = state_of(ctx)
    if against is not None:
        return _loss_gate(state, run_id, against, key, rtol)
    result = state.client.get(f"runs/{run_id}/parity/", limit=1)
    summary = result.get("summary") or {}
    first = result.get("first_divergent")
    if (cosine_min, max_rel_err, thousandth_ratio_min) != (None, None, None):
        first = rejudge(
            _layers(state.client, run_id), cosine_min, max_rel_err, thousandth_ratio_min
        )
    loss = summary.get("loss") or {}
    loss_past = loss.get("first_step_past_tolerance")
    finished = result.get("status") in ("succeeded", "failed")
    # A run that could not compare (a failed side, no msprobe) has no layer to blame.
    compared = bool(summary.get("layers")) or bool(loss.get("steps"))
    broken = first is not None or loss_past is not None or (finished and not compared)
    code = exits.CLI_JOB_FAILED if broken or not finished else exits.CLI_SUCCEEDED
    if state.json:
        output.emit_json(dict(result, first_divergent=first, broken=broken))
        return code
    verdict = "BROKEN" if broken else ("OK" if finished else str(result.get("status")).upper())
    click.echo(f"run #{run_id}: {output.styled(verdict, 'red' if broken else 'green', True)}")
    if finished and not compared:
        click.echo("  nothing was compared: see `npulab runs show` for why")
    if first is not None:
        numbers = ", ".join(
            f"{key} {first[key]:.6g}"
            if isinstance(first.get(key), (int, float)) and math.isfinite(first[key])
            else f"{key} —"
            for key in NUMBER
            if key in first
        )
        click.echo(f"  first divergent: {first['name']} ({', '.join(first.get('broken', []))})")
        click.echo(f"    {numbers}")
        for frame in first.get("stack") or []:
            click.echo(f"    at {frame}")
    if loss.get("steps"):
        click.echo(
            f"  loss: {loss['steps']} steps, largest relative difference "
            f"{loss.get('max_rel_diff')}"
            + (
                f", past {loss.get('tolerance')} from step {loss_past}"
                if loss_past is not None
                else ""
            )
        )
    return code


def _loss_gate(state: Any, run_id: int, against: int, key: str, rtol: float) -> int:
    found = state.client.get(f"runs/{run_id}/parity/loss/", against=against, key=key, rtol=rtol)
    past = found.get("first_step_past_tolerance")
    broken = past is not None or not found.get("steps")
    if state.json:
        output.emit_json(dict(found, broken=broken))
    else:
        verdict = output.styled("BROKEN" if broken else "OK", "red" if broken else "green", True)
        click.echo(f"{key}: run #{run_id} against run #{against}: {verdict}")
        click.echo(
            f"  {found.get('steps')} common steps, largest relative difference "
            f"{found.get('max_rel_diff')}"
            + (f", past {rtol:g} from step {past}" if past is not None else "")
        )
    return exits.CLI_JOB_FAILED if broken else exits.CLI_SUCCEEDED


COMMANDS = [parity]
