"""The host page's snapshot request: it waits for the snapshot and shows it when it arrives."""

from __future__ import annotations

import pytest
from django.test import Client

from npulab.snapshots.services import do_record_snapshot
from tests.conftest import make_operator

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}
URL = "/hosts/cpu-01/snapshot-request/"


@pytest.fixture
def browser(owner) -> Client:
    client = Client()
    client.force_login(make_operator(owner))
    return client


def test_a_requested_snapshot_is_polled_for_until_it_arrives(browser, cpu_host, document) -> None:
    assert 'hx-trigger="every 2s"' not in browser.get("/hosts/cpu-01/").content.decode()
    browser.post(URL)
    page = browser.get("/hosts/cpu-01/").content.decode()
    assert f'hx-get="{URL}" hx-trigger="every 2s"' in page

    waiting = browser.get(URL, **HTMX)
    assert waiting.status_code == 200
    assert "Snapshot requested" in waiting.content.decode()
    assert "HX-Refresh" not in waiting.headers

    cpu_host.refresh_from_db()  # as the agent API loads it, with the request seen
    do_record_snapshot(cpu_host, document())
    arrived = browser.get(URL, **HTMX)
    # The page reloads and shows the snapshot that came.
    assert arrived.headers["HX-Refresh"] == "true"
    page = browser.get("/hosts/cpu-01/").content.decode()
    assert "Collect snapshot now" in page
    assert "Current snapshot" in page


def test_the_poll_url_opened_by_hand_leads_to_the_host_page(browser, cpu_host) -> None:
    response = browser.get(URL)
    assert (response.status_code, response["Location"]) == (302, "/hosts/cpu-01/")
