"""``npulab submit --project`` and ``npulab runs list --project`` against the live platform."""

from __future__ import annotations

import pytest

from npulab.projects.models import default_pool
from tests.cli.conftest import as_json, cli_env, npulab, token  # noqa: F401 - the fixtures
from tests.projects.conftest import make_project
from workers.contract import exits

pytestmark = pytest.mark.django_db(transaction=True)
SMOKE = ("submit", "--kind", "smoke", "--device-type", "cpu")


def test_submit_to_a_project_then_list_its_runs(npulab, owner, cpu_host) -> None:  # noqa: F811
    make_project("alpha", [default_pool()], member=owner)
    run = as_json(npulab(*SMOKE, "--project", "alpha", "--json"))["run"]
    assert run["project"] == "alpha"
    other = as_json(npulab(*SMOKE, "--json"))["run"]
    assert other["project"] == "default"
    listed = as_json(npulab("runs", "list", "--project", "alpha", "--json"))
    assert [each["id"] for each in listed] == [run["id"]]


def test_a_project_one_is_not_in_is_refused_as_usage(npulab, owner, cpu_host) -> None:  # noqa: F811
    make_project("secret", [default_pool()])
    result = npulab(*SMOKE, "--project", "secret")
    assert result.exit_code == exits.CLI_USAGE
    assert "no project 'secret' that you are a member of" in result.stderr
