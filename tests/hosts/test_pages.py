"""The host page with the parts that runs and snapshots add to it (``hosts.pages``)."""

from __future__ import annotations

import pytest
from django.test import Client

from npulab.hosts.pages import host_page
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import do_submit_run
from npulab.snapshots.pages import snapshot_page
from npulab.snapshots.services import do_record_snapshot
from tests.factories import RunFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(owner) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def test_runs_and_snapshots_register_their_parts_of_the_pages() -> None:
    assert "host_runs_context" in repr(host_page)
    assert "host_history_context" in repr(host_page)
    assert "snapshot_runs_context" in repr(snapshot_page)


def test_host_page_names_the_run_leasing_each_device(browser, owner, cpu_host) -> None:
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "cpu", "name": "leased"})
    place_queued_runs()
    page = browser.get("/hosts/cpu-01/").content.decode()
    assert f'<a href="/runs/{run.pk}/">#{run.pk} leased</a>' in page
    assert "free" not in page.split('id="device-table"')[1].split("</table>")[0]


def test_snapshot_page_lists_the_runs_under_it(browser, cpu_host, document) -> None:
    snapshot = do_record_snapshot(cpu_host, document()).snapshot
    run = RunFactory(snapshot=snapshot, host=cpu_host)
    page = browser.get(f"/snapshots/{snapshot.pk}/").content.decode()
    assert f"/runs/{run.pk}/" in page
