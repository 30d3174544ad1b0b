"""Waiting for a run on the command line: the progress line, the log, how it ended.

``submit --wait`` and ``runs wait`` share it; the exit code comes from
``workers.cli.runs.exit_code``.
"""

from __future__ import annotations

from typing import Any, Callable

import click

from workers.cli import junit, output, runs
from workers.cli.base import State
from workers.cli.client import ApiError, Client
from workers.contract import exits

DEFAULT_LOG_LINES = 20


def wait_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """The options of every command that waits for a run to end."""
    for decorator in reversed(
        [
            click.option(
                "--timeout",
                type=click.FloatRange(min=0),
                metavar="S",
                help="Stop waiting after S seconds (exit 4); the run goes on.",
            ),
            click.option("--follow", is_flag=True, help="Print the run's log as it arrives."),
            click.option(
                "--log-lines",
                type=click.IntRange(min=0),
                default=DEFAULT_LOG_LINES,
                show_default=True,
                help="Log lines shown at the end (without --follow).",
            ),
            click.option("-q", "--quiet", is_flag=True, help="No progress indicator."),
            click.option(
                "--junit",
                "junit_path",
                type=click.Path(dir_okay=False, writable=True),
                metavar="FILE",
                help="Write a JUnit XML report: one test case per step, and the result.",
            ),
        ]
    ):
        function = decorator(function)
    return function


def _progress_text(run: dict[str, Any], elapsed: float) -> tuple[str, str]:
    """The indicator's text, and the part of it whose change is worth a line in a log."""
    parts = [f"run {run['id']} {output.status(run.get('status'))}"]
    if run.get("host"):
        parts[0] += f" on {run['host']}"
    if run.get("attempt", 1) and int(run.get("attempt") or 1) > 1:
        parts.append(f"attempt {run['attempt']}")
    steps = run.get("steps") or []
    if steps:
        passed = sum(1 for s in steps if s.get("status") == "pass")
        parts.append(f"steps {passed}/{len(steps)} passed, last {steps[-1].get('name')}")
    key = " · ".join(parts)
    if run.get("status") == "queued" and run.get("queue_reason"):
        parts.append(str(run["queue_reason"]))
        key += " · " + str(run["queue_reason"])
    if run.get("status") == "running":
        live = run.get("progress") or {}
        parts += _live_progress(live)
        if live.get("running_step_name"):
            # A CI log gets a line as each named step begins: where a hung run hangs.
            key += f" · step {live['running_step_name']}"
    parts.append(output.duration(elapsed))
    return " · ".join(parts), key


def _live_progress(progress: dict[str, Any]) -> list[str]:
    """The platform's progress of a running run: its step running now, its steps done."""
    parts = []
    if progress.get("running_step"):
        running = output.duration(progress.get("running_s")) or "0s"
        # The name when the runner said which step began; older platforms give the ordinal only.
        step = progress.get("running_step_name") or progress["running_step"]
        parts.append(f"step {step} running {running}")
    if progress.get("step") is not None:
        total = progress.get("total_steps")
        text = f"step {progress['step']}/{total}" if total else f"step {progress['step']}"
        if progress.get("steps_per_s"):
            text += f" at {progress['steps_per_s']:.1f}/s"
        if progress.get("eta_s") is not None:
            text += f", ETA {output.duration(progress['eta_s']) or '0s'}"
        parts.append(text)
    return parts


def follow_run(
    state: State,
    run_id: int,
    timeout: float | None,
    follow: bool,
    log_lines: int,
    quiet: bool,
    junit_path: str | None,
    created: bool | None = None,
) -> int:
    """Wait for a run, show how it goes, report how it ended; return the exit code."""
    client = state.client
    progress = output.Progress(enabled=not quiet)

    def on_update(run: dict[str, Any], elapsed: float) -> None:
        text, key = _progress_text(run, elapsed)
        progress.update(text, key)

    def on_log(event: dict[str, Any]) -> None:
        progress.clear()
        line = str((event.get("data") or {}).get("line", ""))
        # Under --json, stdout holds one document: the log goes to stderr.
        click.echo(line, err=state.json)

    run, code = runs.wait(client, run_id, timeout, on_update, on_log if follow else None)
    progress.clear()
    tail = (
        []
        if follow
        else [str(e["data"].get("line", "")) for e in log_tail_events(client, run, log_lines)]
    )
    if junit_path:
        suite = junit.run_suite(run, client.get, code, tail)
        junit.write(junit_path, [suite])
    if state.json:
        body: dict[str, Any] = {"run": run}
        if created is not None:
            body["created"] = created
        body.update(outcome=runs.OUTCOMES[code], exit_code=code, log_tail=tail)
        output.emit_json(body)
        return code
    if tail:
        click.echo(output.styled(f"--- last {len(tail)} log lines", bold=True))
        for line in tail:
            click.echo(line)
    if run.get("steps"):
        click.echo(steps_table(run["steps"]))
    click.echo(_ending(run, code, timeout))
    return code


def log_tail_events(client: Client, run: dict[str, Any], lines: int) -> list[dict[str, Any]]:
    try:
        return runs.log_tail(client, int(run["id"]), lines)
    except ApiError:
        return []  # the outcome matters more than its log


def _ending(run: dict[str, Any], code: int, timeout: float | None) -> str:
    run_id, status = run["id"], run.get("status")
    took = output.duration(run.get("duration_s"))
    reason = run.get("exit_reason") or ""
    if code == exits.CLI_GAVE_UP:
        return (
            f"gave up waiting after {output.duration(timeout)}: run {run_id} is still "
            f"{output.status(status)}; it goes on (npulab runs cancel {run_id} stops it)"
        )
    text = f"run {run_id} {output.status(status)}"
    if run.get("exit_cause"):
        text += f" ({run['exit_cause']})"
    if took:
        text += f" in {took}"
    if reason and code != exits.CLI_SUCCEEDED:
        text += f": {reason}"
    if code == exits.CLI_INFRASTRUCTURE:
        text += " — an infrastructure failure, safe to retry"
    return text


def steps_table(steps: list[dict[str, Any]]) -> str:
    rows = [
        {
            "name": s.get("name"),
            "status": s.get("status"),
            "seconds": s.get("seconds"),
            "attempt": s.get("attempt"),
            "error": s.get("error"),
        }
        for s in steps
    ]
    return output.table(
        rows,
        [
            ("name", "step"),
            ("status", "status"),
            ("seconds", "s"),
            ("attempt", "attempt"),
            ("error", "error"),
        ],
        colour={"status": output.status},
    )
