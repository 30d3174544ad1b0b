"""The CLI in-process (click's CliRunner) against the live Django server, over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from click.testing import CliRunner, Result
from django.utils import timezone

from npulab.accounts.services import do_issue_api_token
from npulab.runs.models import Run, RunEvent
from tests.factories import RunFactory
from workers.cli.main import cli
from workers.contract import exits
from workers.contract.kinds import validate


@pytest.fixture
def token(owner: Any) -> str:
    return do_issue_api_token(owner, name="cli")[1]


@pytest.fixture
def cli_env(live_server: Any, token: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> dict:
    """The owner's token and the live server in the environment; a config file of the test's."""
    monkeypatch.setenv("NPULAB_URL", live_server.url)
    monkeypatch.setenv("NPULAB_TOKEN", token)
    monkeypatch.setenv("NPULAB_CONFIG", str(tmp_path / "config.json"))
    monkeypatch.delenv("NO_COLOR", raising=False)
    return {"url": live_server.url, "token": token, "config": tmp_path / "config.json"}


@pytest.fixture
def npulab(cli_env: dict) -> Callable[..., Result]:
    """``npulab(*args, input=...)``: the command's Result (exit_code, stdout, stderr)."""
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None, env: dict | None = None) -> Result:
        return runner.invoke(cli, list(args), input=input, env=env, catch_exceptions=False)

    return invoke


def as_json(result: Result) -> Any:
    return json.loads(result.stdout)


def finished_run(
    owner: Any,
    status: str = Run.Status.SUCCEEDED,
    cause: str = exits.COMPLETED,
    steps: Sequence[tuple[str, str]] = (),
    kind: str = "smoke",
    reason: str = "",
    **summary: float,
) -> Run:
    """A run that ended as asked, with step events as the smoke runner writes them."""
    spec = {"kind": kind, "device_type": "cpu"}
    if kind == "training":
        spec["entry"] = "builtin:cnn"
    now = timezone.now()
    run = RunFactory(
        spec=validate(spec),
        submitted_by=owner,
        status=status,
        started_at=now,
        finished_at=now,
        exit_cause=cause,
        exit_reason=reason,
        result={"status": "succeeded" if status == "succeeded" else "failed", "summary": summary},
    )
    for name, step_status in steps:
        RunEvent.objects.create(
            run=run,
            attempt=1,
            type="step",
            time=now,
            data={
                "name": name,
                "status": step_status,
                "seconds": 0.25,
                "detail": {"size": 16},
                "error": "max abs error 3.0 > 0.001" if step_status == "fail" else None,
            },
        )
    return run


def log_lines(run: Run, *lines: str) -> None:
    for line in lines:
        RunEvent.objects.create(
            run=run,
            attempt=1,
            type="log",
            time=timezone.now(),
            data={"stream": "stdout", "line": line},
        )
