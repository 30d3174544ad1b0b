"""``npulab submit --wait-for-host``: a run no registered host could take waits instead of 400."""

from __future__ import annotations

import pytest

from npulab.runs.models import Run
from tests.cli.conftest import as_json
from workers.contract import exits

pytestmark = pytest.mark.django_db(transaction=True)

# cpu-01 has one CPU device: two can never be placed on any registered host.
TWO_DEVICES = ("submit", "--kind", "smoke", "--device-type", "cpu", "--devices", "2")


def test_without_it_a_run_no_host_could_take_is_refused_naming_why(npulab, cpu_host) -> None:
    result = npulab(*TWO_DEVICES)
    assert result.exit_code == exits.CLI_USAGE
    assert "no cpu host has 2 devices: cpu-01 has 1" in result.stderr
    assert "wait_for_host" in result.stderr
    body = as_json(npulab(*TWO_DEVICES, "--json"))
    assert body["error"]["status"] == 400
    assert body["error"]["body"]["devices"][0].startswith("no cpu host has 2 devices")
    assert not Run.objects.exists()


def test_with_it_the_run_is_queued_with_the_reason_and_an_expiry(npulab, cpu_host) -> None:
    body = as_json(npulab(*TWO_DEVICES, "--wait-for-host", "--json"))
    run = body["run"]
    assert (run["status"], run["wait_for_host"]) == ("queued", True)
    assert run["queue_reason"].startswith(
        "no registered host could take it (no cpu host has 2 devices: cpu-01 has 1); "
        "waiting for one until "
    )
    assert run["queue_expires_at"] is not None
    stored = Run.objects.get(pk=run["id"])
    assert (stored.wait_for_host, stored.devices) == (True, 2)


def test_with_wait_the_progress_line_says_what_it_waits_for(npulab, cpu_host) -> None:
    result = npulab(*TWO_DEVICES, "--wait-for-host", "--wait", "--timeout", "0.5")
    assert result.exit_code == exits.CLI_GAVE_UP
    run = Run.objects.get()
    assert f"run {run.pk} queued" in result.stderr
    assert "no registered host could take it" in result.stderr


def test_a_run_some_host_can_take_is_not_marked_as_waiting(npulab, cpu_host) -> None:
    body = as_json(
        npulab("submit", "--kind", "smoke", "--device-type", "cpu", "--wait-for-host", "--json")
    )
    run = Run.objects.get(pk=body["run"]["id"])
    assert run.wait_for_host
    assert run.queue_expires_at is None
