"""Reading the platform: ``npulab runs``, ``hosts``, ``kinds`` and ``snapshot``."""

from __future__ import annotations

import json
from typing import Any

import click

from workers.cli import junit, output, runs
from workers.cli.base import complete_host, complete_kind, handled, json_option, state_of
from workers.cli.diagnose import diagnosis_lines
from workers.cli.follow import follow_run, log_tail_events, steps_table, wait_options
from workers.contract.devices import DEVICE_TYPES

# -- runs -----------------------------------------------------------------------


@click.group("runs")
def runs_group() -> None:
    """List, show, wait for, cancel runs and read their logs."""


RUN_COLUMNS = [
    ("id", "id"),
    ("kind", "kind"),
    ("name", "name"),
    ("status", "status"),
    ("host", "host"),
    ("devices", "devices"),
    ("submitted_by", "by"),
    ("created", "created"),
    ("duration", "took"),
]


@runs_group.command("list")
@click.option("--status", help="queued, dispatched, running, succeeded, failed, cancelled, lost.")
@click.option("--kind", shell_complete=complete_kind)
@click.option("--host", shell_complete=complete_host)
@click.option("--device-type", type=click.Choice(DEVICE_TYPES))
@click.option("--user", "submitted_by", metavar="USERNAME", help="Submitted by this user.")
@click.option("--project", metavar="SLUG", help="Of this project.")
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True)
@json_option
@click.pass_context
@handled
def runs_list(
    ctx: click.Context,
    status: str | None,
    kind: str | None,
    host: str | None,
    device_type: str | None,
    submitted_by: str | None,
    project: str | None,
    limit: int,
) -> None:
    """The newest runs first (of the projects you are in)."""
    state = state_of(ctx)
    page = state.client.get(
        "runs/",
        status=status,
        kind=kind,
        host=host,
        device_type=device_type,
        submitted_by=submitted_by,
        project=project,
        limit=limit,
    )
    results = page.get("results", [])
    if state.json:
        output.emit_json(results)
        return
    rows = [
        dict(
            run,
            devices=run.get("shape") or f"{run.get('devices')}×{run.get('device_type')}",
            created=str(run.get("created") or "")[:19].replace("T", " "),
            duration=output.duration(run.get("duration_s")),
        )
        for run in results
    ]
    click.echo(output.table(rows, RUN_COLUMNS, colour={"status": output.status}))
    if page.get("count", 0) > len(results):
        click.echo(f"({len(results)} of {page['count']}; --limit for more)")


@runs_group.command("show")
@click.argument("run_id", type=int, metavar="RUN")
@click.option(
    "--junit",
    "junit_path",
    type=click.Path(dir_okay=False, writable=True),
    metavar="FILE",
    help="Write the run as a JUnit XML report.",
)
@click.option("--log-lines", type=click.IntRange(min=0), default=0, help="Show the log's tail.")
@json_option
@click.pass_context
@handled
def runs_show(ctx: click.Context, run_id: int, junit_path: str | None, log_lines: int) -> None:
    """One run: status, steps, attempts, how it ended."""
    state = state_of(ctx)
    run = state.client.get(f"runs/{run_id}/")
    tail = [str(e["data"].get("line", "")) for e in log_tail_events(state.client, run, log_lines)]
    if junit_path:
        junit.write(junit_path, [junit.run_suite(run, state.client.get, None, tail)])
    if state.json:
        output.emit_json(run)
        return
    click.echo(
        output.fields(
            [
                ("run", f"{run['id']} {run.get('name') or ''}".strip()),
                ("kind", run.get("kind")),
                ("status", output.status(run.get("status"))),
                ("host", run.get("host")),
                ("devices", run.get("shape") or f"{run.get('devices')}×{run.get('device_type')}"),
                ("attempt", run.get("attempt")),
                ("submitted by", run.get("submitted_by")),
                ("created", run.get("created")),
                ("took", output.duration(run.get("duration_s"))),
                ("queue reason", run.get("queue_reason") if run.get("status") == "queued" else ""),
                ("exit cause", run.get("exit_cause")),
                ("exit reason", run.get("exit_reason")),
                (
                    "infrastructure",
                    "yes, safe to retry" if run.get("infrastructure_failure") else "",
                ),
                ("snapshot", run.get("snapshot")),
                ("url", run.get("web_url")),
                *diagnosis_lines(run.get("diagnosis")),
            ]
        )
    )
    if run.get("steps"):
        click.echo()
        click.echo(steps_table(run["steps"]))
    attempts = run.get("attempts") or []
    if len(attempts) > 1:
        click.echo()
        click.echo(
            output.table(
                attempts,
                [
                    ("number", "attempt"),
                    ("host", "host"),
                    ("status", "status"),
                    ("exit_cause", "cause"),
                    ("resumed_from_step", "resumed from"),
                    ("exit_reason", "reason"),
                ],
                colour={"status": output.status},
            )
        )
    metrics = state.client.get(f"runs/{run_id}/metrics/").get("metrics") or []
    if metrics:
        click.echo()
        click.echo(
            output.table(
                metrics,
                [
                    ("key", "metric"),
                    ("source", "source"),
                    ("points", "points"),
                    ("last_step", "last step"),
                ],
            )
        )
    logged = [("param", key, value) for key, value in (run.get("params") or {}).items()]
    logged += [("tag", key, value) for key, value in (run.get("logged_tags") or {}).items()]
    if logged:
        click.echo()
        rows = [{"what": what, "key": key, "value": value} for what, key, value in logged]
        click.echo(output.table(rows, [("what", ""), ("key", "name"), ("value", "value")]))
    for line in tail:
        click.echo(line)


@runs_group.command("wait")
@click.argument("run_id", type=int, metavar="RUN")
@wait_options
@json_option
@click.pass_context
@handled
def runs_wait(
    ctx: click.Context,
    run_id: int,
    timeout: float | None,
    follow: bool,
    log_lines: int,
    quiet: bool,
    junit_path: str | None,
) -> int:
    """Wait for a run to end and exit with its outcome (as submit --wait does)."""
    return follow_run(state_of(ctx), run_id, timeout, follow, log_lines, quiet, junit_path)


@runs_group.command("cancel")
@click.argument("run_id", type=int, metavar="RUN")
@json_option
@click.pass_context
@handled
def runs_cancel(ctx: click.Context, run_id: int) -> None:
    """Cancel a run: at once if it has not started, else its host stops it (within seconds)."""
    state = state_of(ctx)
    run = state.client.post(f"runs/{run_id}/cancel/").json()
    if state.json:
        output.emit_json(run)
    elif run.get("status") == "cancelled":
        click.echo(f"run {run_id} {output.status('cancelled')}")
    else:
        click.echo(f"run {run_id}: cancel requested; its host stops it ({run.get('status')})")


@runs_group.command("logs")
@click.argument("run_id", type=int, metavar="RUN")
@click.option("--follow", "-f", is_flag=True, help="Keep printing until the run ends.")
@click.option("--tail", type=click.IntRange(min=1), help="Only the last N lines.")
@json_option
@click.pass_context
@handled
def runs_logs(ctx: click.Context, run_id: int, follow: bool, tail: int | None) -> None:
    """The run's log; with --json one event a line (JSON Lines)."""
    state = state_of(ctx)
    client = state.client

    def emit(event: dict[str, Any]) -> None:
        if state.json:
            click.echo(json.dumps(event, default=str))
        else:
            click.echo(str((event.get("data") or {}).get("line", "")))

    after = 0
    if tail:
        for event in runs.log_tail(client, run_id, tail):
            emit(event)
            after = max(after, int(event["id"]))
    elif not follow:
        runs.new_logs(client, run_id, 0, emit)
        return
    if follow:
        seen = {"after": after}

        def emit_new(event: dict[str, Any]) -> None:
            if int(event["id"]) > seen["after"]:
                emit(event)

        runs.wait(client, run_id, None, None, emit_new)


# -- hosts ----------------------------------------------------------------------


@click.group("hosts")
def hosts_group() -> None:
    """Accelerator hosts and their devices."""


@hosts_group.command("list")
@json_option
@click.pass_context
@handled
def hosts_list(ctx: click.Context) -> None:
    """Every host: device type, busy and total devices, status."""
    state = state_of(ctx)
    hosts = state.client.get("hosts/", limit=1000).get("results", [])
    if state.json:
        output.emit_json(hosts)
        return
    rows = [
        dict(
            host,
            busy=f"{host.get('busy_devices')}/{host.get('device_count')}",
            heartbeat=str(host.get("last_heartbeat") or "")[:19].replace("T", " "),
        )
        for host in hosts
    ]
    columns = [
        ("name", "name"),
        ("device_type", "type"),
        ("busy", "busy"),
        ("status", "status"),
        ("enabled", "enabled"),
        ("labels", "labels"),
        ("heartbeat", "last heartbeat"),
    ]
    click.echo(output.table(rows, columns, colour={"status": output.status}))


@hosts_group.command("show")
@click.argument("name", shell_complete=complete_host)
@json_option
@click.pass_context
@handled
def hosts_show(ctx: click.Context, name: str) -> None:
    """One host and its devices."""
    state = state_of(ctx)
    host = state.client.get(f"hosts/{name}/")
    if state.json:
        output.emit_json(host)
        return
    pairs = [
        ("host", host.get("name")),
        ("status", output.status(host.get("status"))),
        ("enabled", output.cell(host.get("enabled"))),
        ("devices", f"{host.get('device_count')}×{host.get('device_type')}"),
        ("busy", host.get("busy_devices")),
        ("labels", output.cell(host.get("labels"))),
        ("hostname", host.get("hostname")),
        ("worker", host.get("worker_version")),
        ("python", host.get("python_version")),
        ("platform", host.get("platform")),
        ("last heartbeat", host.get("last_heartbeat")),
    ]
    click.echo(output.fields(pairs))
    devices = host.get("devices") or []
    if devices:
        keys = sorted({key for device in devices for key in device}, key=lambda k: k != "index")
        click.echo()
        click.echo(output.table(devices, [(key, key) for key in keys]))


# -- kinds ----------------------------------------------------------------------


@click.group("kinds")
def kinds_group() -> None:
    """Run kinds and the spec fields each accepts."""


@kinds_group.command("list")
@json_option
@click.pass_context
@handled
def kinds_list(ctx: click.Context) -> None:
    """Every kind the platform knows."""
    state = state_of(ctx)
    kinds = state.client.get("kinds/")
    if state.json:
        output.emit_json(kinds)
        return
    click.echo(output.table(kinds, [("name", "name"), ("title", "title")]))


@kinds_group.command("show")
@click.argument("name", shell_complete=complete_kind)
@json_option
@click.pass_context
@handled
def kinds_show(ctx: click.Context, name: str) -> None:
    """A kind's spec fields: type, default, bounds (the options of submit --kind)."""
    state = state_of(ctx)
    kind = state.client.get(f"kinds/{name}/")
    if state.json:
        output.emit_json(kind)
        return
    click.echo(f"{kind['name']}: {kind.get('title', '')}")
    rows = [
        dict(
            field,
            option="--" + field["name"].replace("_", "-"),
            default="(required)" if field.get("required") else json.dumps(field.get("default")),
        )
        for field in kind.get("fields", [])
        if field["name"] != "kind"
    ]
    columns = [
        ("option", "option"),
        ("type", "type"),
        ("default", "default"),
        ("minimum", "min"),
        ("maximum", "max"),
        ("choices", "choices"),
        ("help", "help"),
    ]
    click.echo(output.table(rows, columns))


# -- snapshots and the upgrade review -------------------------------------------


@click.group("snapshot")
def snapshot_group() -> None:
    """Environment snapshots of hosts: show one, diff two."""


@snapshot_group.command("show")
@click.argument("snapshot_id", type=int, metavar="ID")
@json_option
@click.pass_context
@handled
def snapshot_show(ctx: click.Context, snapshot_id: int) -> None:
    """A snapshot's key versions, compatibility and known-good mark."""
    state = state_of(ctx)
    snapshot = state.client.get(f"snapshots/{snapshot_id}/")
    if state.json:
        output.emit_json(snapshot)
        return
    summary = snapshot.get("summary") or {}
    verdict = (snapshot.get("compatibility") or {}).get("verdict")
    good = snapshot.get("known_good")
    pairs = [
        ("snapshot", f"{snapshot['id']} ({str(snapshot.get('hash', ''))[:12]})"),
        ("host", snapshot.get("host")),
        ("python", snapshot.get("python")),
        ("first seen", snapshot.get("first_seen")),
        ("last seen", snapshot.get("last_seen")),
        ("known good", f"yes, by {snapshot.get('known_good_by')}" if good else "no"),
        ("compatibility", output.status(verdict) if verdict else ""),
    ]
    pairs += [(str(key), output.cell(value)) for key, value in summary.items()]
    click.echo(output.fields(pairs))


@snapshot_group.command("diff")
@click.argument("a", type=int)
@click.argument("b", type=int)
@json_option
@click.pass_context
@handled
def snapshot_diff(ctx: click.Context, a: int, b: int) -> None:
    """What changed from snapshot A to snapshot B: versions, packages, devices, env."""
    state = state_of(ctx)
    diff = state.client.get("snapshots/diff/", a=a, b=b)
    if state.json:
        output.emit_json(diff)
        return
    if diff.get("identical"):
        click.echo(f"snapshots {a} and {b} are identical")
        return
    for item in diff.get("versions", []):
        click.echo(f"{item['name']}: {item.get('from') or 'none'} → {item.get('to') or 'none'}")
    for section in ("packages", "env"):
        changes = diff.get(section) or {}
        for key, value in (changes.get("added") or {}).items():
            click.echo(output.styled(f"+ {section} {key} {value}", "green"))
        for key, value in (changes.get("removed") or {}).items():
            click.echo(output.styled(f"- {section} {key} {value}", "red"))
        for key, (old, new) in (changes.get("changed") or {}).items():
            click.echo(output.styled(f"~ {section} {key} {old} → {new}", "yellow"))
    devices = diff.get("devices") or {}
    for key in devices.get("added", []):
        click.echo(f"+ device {key}")
    for key in devices.get("removed", []):
        click.echo(f"- device {key}")
    for change in devices.get("changed", []):
        click.echo(
            f"~ device {change['device']} {change['field']}: {change['from']} → {change['to']}"
        )
    findings = diff.get("findings") or {}
    for finding in findings.get("appeared", []):
        click.echo(output.styled(f"+ finding {finding.get('title')}", "red"))
    for finding in findings.get("resolved", []):
        click.echo(output.styled(f"- finding {finding.get('title')}", "green"))
