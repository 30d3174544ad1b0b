"""A kind defined only in the tests goes through every generic path with no change to them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from django.test import Client
from django.urls import reverse
from junitparser import JUnitXml
from rest_framework.test import APIClient

from npulab.accounts.services import do_issue_api_token
from npulab.runs.models import Run, RunEvent
from tests.kinds.echo import ECHO, REFUSED
from tests.kinds.echo.models import EchoWord
from tests.paths import REPO_DIR
from workers.cli.main import cli
from workers.contract import exits, kinds
from workers.contract.events import EVENTS_FILE
from workers.events import iter_events

pytestmark = pytest.mark.django_db(transaction=True)


def run_by_hand(spec: dict[str, Any], run_dir: Path) -> int:
    """``python -m workers.run`` as a user runs it on a host: no platform at all."""
    spec_file = run_dir.parent / "spec.json"
    spec_file.write_text(json.dumps(spec))
    return subprocess.run(
        [sys.executable, "-m", "workers.run", str(spec_file), "--run-dir", str(run_dir)],
        cwd=REPO_DIR,
        env=dict(os.environ),
        timeout=300,
        check=False,
    ).returncode


def execute_on_host(host_api: APIClient, run_id: int, run_dir: Path) -> Run:
    """What the host worker does with a placed run: claim, run, forward the events, finish."""
    # Alone in the queue, it was placed as its submission committed.
    assert Run.objects.get(pk=run_id).status == Run.Status.DISPATCHED
    claim = host_api.post(f"/api/v1/agent/runs/{run_id}/claim/", {"attempt": 1}, format="json")
    assert claim.status_code == 200, claim.content
    code = run_by_hand(claim.json()["spec"], run_dir)
    events_file = run_dir / EVENTS_FILE
    batch = {
        "attempt": 1,
        "start": 0,
        "end": events_file.stat().st_size,
        "events": list(iter_events(str(events_file))),
    }
    stored = host_api.post(f"/api/v1/agent/runs/{run_id}/events/", batch, format="json")
    assert stored.status_code == 200, stored.content
    finish = {"attempt": 1, "exit_code": code}
    reply = host_api.post(f"/api/v1/agent/runs/{run_id}/finish/", finish, format="json")
    assert reply.status_code == 200, reply.content
    return Run.objects.get(pk=run_id)


def test_the_test_kind_is_refused_with_its_own_field_named(api: APIClient, cpu_host: Any) -> None:
    reply = api.post(
        "/api/v1/runs/", {"kind": "echo", "device_type": "cpu", "repeat": 0}, format="json"
    )
    assert reply.status_code == 400
    assert "repeat" in reply.json()


def test_the_test_kind_runs_ingests_into_its_own_table_and_shows_its_panel(
    api: APIClient, host_api: APIClient, owner: Any, tmp_path: Path
) -> None:
    submitted = api.post(
        "/api/v1/runs/",
        {"kind": "echo", "device_type": "cpu", "words": ["alpha", "beta"], "repeat": 2},
        format="json",
    )
    assert submitted.status_code == 201, submitted.content

    run = execute_on_host(host_api, submitted.json()["id"], tmp_path / "run")

    assert run.status == Run.Status.SUCCEEDED
    assert run.result["summary"] == {"echoed": 4}
    words = list(EchoWord.objects.filter(run=run).values_list("index", "word"))
    assert words == [(0, "alpha"), (1, "alpha"), (2, "beta"), (3, "beta")]
    assert not RunEvent.objects.filter(run=run, type=ECHO).exists()
    page = Client()
    page.force_login(owner)
    html = page.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="echo-words"' in html
    assert '<span class="badge text-bg-light border me-1" data-index="3">beta</span>' in html


def test_a_cause_only_the_test_kind_declares_is_recorded_as_it_is(
    api: APIClient, host_api: APIClient, tmp_path: Path
) -> None:
    submitted = api.post(
        "/api/v1/runs/",
        {"kind": "echo", "device_type": "cpu", "words": ["fine", "refuse"]},
        format="json",
    )

    run = execute_on_host(host_api, submitted.json()["id"], tmp_path / "run")

    assert run.status == Run.Status.FAILED
    assert run.exit_cause == REFUSED
    assert run.exit_cause_label == "Refused to echo"
    assert run.exit_code == exits.EXIT_FAILED
    assert list(EchoWord.objects.filter(run=run).values_list("word", flat=True)) == ["fine"]


def test_the_kinds_endpoint_lists_the_test_kind_with_its_fields(api: APIClient) -> None:
    listed = api.get("/api/v1/kinds/").json()
    # Every registered kind, the test-only one among them.
    assert [kind["name"] for kind in listed] == kinds.names()
    assert "echo" in kinds.names()
    echo = api.get("/api/v1/kinds/echo/").json()
    assert echo["causes"] == [REFUSED]
    assert echo["event_types"] == [ECHO]
    repeat = next(field for field in echo["fields"] if field["name"] == "repeat")
    assert repeat == {
        "name": "repeat",
        "type": "integer",
        "required": False,
        "default": 1,
        "minimum": 1,
        "maximum": 10,
        "choices": None,
        "help": "Times each word.",
    }
    assert api.get("/api/v1/kinds/nope/").status_code == 404


def test_the_test_kind_brings_its_page_and_api_route(
    api: APIClient, host_api: APIClient, owner: Any, tmp_path: Path
) -> None:
    submitted = api.post(
        "/api/v1/runs/", {"kind": "echo", "device_type": "cpu", "words": ["gamma"]}, format="json"
    )
    run = execute_on_host(host_api, submitted.json()["id"], tmp_path / "run")

    assert api.get(f"/api/v1/runs/{run.pk}/echo/").json() == [{"index": 0, "word": "gamma"}]
    assert reverse("api:run-echo", args=[run.pk]) == f"/api/v1/runs/{run.pk}/echo/"
    page = Client()
    page.force_login(owner)
    html = page.get(reverse("echo:words", args=[run.pk])).content.decode()
    assert f"Words of run #{run.pk}" in html
    assert 'data-index="0">gamma</span>' in html


def test_the_test_kind_brings_its_cli_command_and_junit_cases(
    api: APIClient, host_api: APIClient, owner: Any, tmp_path: Path, live_server: Any
) -> None:
    submitted = api.post(
        "/api/v1/runs/",
        {"kind": "echo", "device_type": "cpu", "words": ["alpha", "beta"]},
        format="json",
    )
    run = execute_on_host(host_api, submitted.json()["id"], tmp_path / "run")
    env = {
        "NPULAB_URL": live_server.url,
        "NPULAB_TOKEN": do_issue_api_token(owner, name="cli")[1],
        "NPULAB_CONFIG": str(tmp_path / "config.json"),
    }
    runner = CliRunner()

    words = runner.invoke(cli, ["echo-words", str(run.pk)], env=env, catch_exceptions=False)
    assert (words.exit_code, words.stdout.splitlines()) == (0, ["alpha", "beta"])
    junit = tmp_path / "echo.xml"
    shown = runner.invoke(
        cli, ["runs", "show", str(run.pk), "--junit", str(junit)], env=env, catch_exceptions=False
    )
    assert shown.exit_code == exits.CLI_SUCCEEDED, shown.output
    cases = [
        (case.classname, case.name) for suite in JUnitXml.fromfile(str(junit)) for case in suite
    ]
    # The kind's cases, then the run's own result.
    assert cases == [
        ("npulab.echo", "word 0"),
        ("npulab.echo", "word 1"),
        ("npulab.echo", "result"),
    ]


def test_nothing_outside_the_kinds_folder_names_it() -> None:
    """One folder and one registration (NPULAB_KINDS): no setting, URL list, template folder,
    import contract or generic module names the test-only kind."""
    folder = REPO_DIR / "tests" / "kinds" / "echo"
    registration = REPO_DIR / "tests" / "settings.py"
    places = [
        *(REPO_DIR / "platform").rglob("*.py"),
        *(REPO_DIR / "platform").rglob("*.html"),
        *(REPO_DIR / "templates").rglob("*.html"),
        *(REPO_DIR / "workers").rglob("*.py"),
        REPO_DIR / "pyproject.toml",
        REPO_DIR / "Makefile",
        registration,
    ]
    naming = [
        str(path.relative_to(REPO_DIR))
        for path in places
        if folder not in path.parents and "tests.kinds.echo" in path.read_text()
    ]
    assert naming == ["tests/settings.py"]
    assert registration.read_text().count("tests.kinds.echo") == 1
    assert not (REPO_DIR / "templates" / "echo").exists()
