"""The host page's device table and chart panel, and the run page's telemetry panel."""

from __future__ import annotations

import json
import re
import time
from datetime import timedelta

import pytest
from django.test import Client

from npulab.hosts.pages import host_page
from npulab.runs.models import RunAttempt
from npulab.runs.pages import run_panels
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import do_claim_run, do_submit_run
from npulab.runs.telemetry import PANEL
from npulab.telemetry.services import record_samples
from tests.conftest import register
from tests.factories import HostFactory
from tests.telemetry.conftest import WARNING_8, capture_samples
from workers.contract.telemetry import sample

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(owner) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def chart_data(html: str) -> dict:
    found = re.search(r'<script type="application/json">(.*?)</script>', html, re.S)
    assert found, html
    return json.loads(found.group(1))


def test_telemetry_adds_its_parts_to_the_host_and_run_pages() -> None:
    assert "host_telemetry_context" in repr(host_page)
    assert PANEL in run_panels(())


def test_device_table_shows_each_chips_latest_health_readings_and_last_hour(
    browser, npu_host
) -> None:
    now = time.time()
    at = capture_samples(WARNING_8)
    for back in range(600, 0, -60):
        record_samples(npu_host, at(now - back), now=now)
    error = "dcmi module initialize failed. ret is -8005"
    record_samples(npu_host, [sample(now, 5, "UNKNOWN", error=error)], now=now)
    page = browser.get("/hosts/npu-01/").content.decode()
    table = page.split('id="device-table"')[1].split("</table>")[0]
    rows = table.split("<tr>")[2:]
    assert len(rows) == 8
    # Chip 0 of the 9010 capture: 42 °C, 70.5 W; chip 3 WARNING; chip 5's tool failed.
    assert "42 °C" in rows[0]
    assert "70.5 W" in rows[0]
    assert "/ 32,768 MB" in rows[0]
    assert ">OK<" in rows[0]
    assert ">WARNING<" in rows[3]
    assert ">UNKNOWN<" in rows[5]
    assert error in rows[5]
    assert rows[0].count('<svg class="sparkline"') == 4
    assert 'hx-get="/hosts/npu-01/telemetry/?window=6h"' in page


def test_a_host_without_telemetry_says_so(browser, cpu_host) -> None:
    page = browser.get("/hosts/cpu-01/").content.decode()
    assert "no telemetry" in page.split('id="device-table"')[1]


def test_the_chart_fragment_draws_the_window_asked_for(browser, npu_host) -> None:
    now = time.time()
    at = capture_samples()
    for back in (3000, 1800, 60):
        record_samples(npu_host, at(now - back), now=now)
    one_hour = browser.get("/hosts/npu-01/telemetry/?window=1h").content.decode()
    data = chart_data(one_hour)
    temperature = next(c for c in data["charts"] if c["reading"] == "temperature_c")
    assert [s["device"] for s in temperature["series"]] == list(range(8))
    assert len(temperature["series"][0]["points"]) == 3
    assert data["end"] - data["start"] in (3600, 3601)
    assert 'class="btn btn-primary" data-window="1h"' in one_hour
    six_hours = browser.get("/hosts/npu-01/telemetry/?window=6h").content.decode()
    assert 'data-source="raw"' in six_hours
    seven_days = browser.get("/hosts/npu-01/telemetry/?window=7d").content.decode()
    assert 'data-source="rollups"' in seven_days
    assert 'class="btn btn-primary" data-window="7d"' in seven_days


def test_a_bad_window_is_a_400_that_says_what_is_allowed(browser, npu_host) -> None:
    response = browser.get("/hosts/npu-01/telemetry/?window=2y")
    assert response.status_code == 400
    assert "1h, 6h, 24h, 7d, 30d, 90d" in response.content.decode()
    assert browser.get("/hosts/npu-01/telemetry/?start=10&end=5").status_code == 400


def test_run_page_shows_the_telemetry_of_the_devices_the_run_used(browser, owner) -> None:
    host = register(HostFactory(name="npu-02"), "npu", 8)
    run = do_submit_run(owner, {"kind": "smoke", "device_type": "npu", "devices": 2})
    place_queued_runs()
    run = do_claim_run(host, run.pk, 1)
    attempt = RunAttempt.objects.get(run=run, number=1)
    assert len(attempt.device_indices) == 2
    # It started a minute ago; its devices sampled a second later.
    attempt.started_at -= timedelta(minutes=1)
    attempt.save(update_fields=["started_at"])
    started = attempt.started_at.timestamp()
    record_samples(host, capture_samples()(started + 1))
    page = browser.get(f"/runs/{run.pk}/").content.decode()
    panel = page.split('id="run-telemetry"')[1]
    devices = ",".join(str(i) for i in attempt.device_indices)
    url = re.search(r'data-url="(/hosts/npu-02/telemetry/\?[^"]+)"', panel).group(1)
    assert url.endswith(f"devices={devices}")
    assert "end=" not in url  # the attempt runs: each reload reaches the present
    assert 'hx-preserve="true"' in panel
    assert 'data-active="1"' in panel
    fragment = browser.get(url.replace("&amp;", "&")).content.decode()
    power = next(c for c in chart_data(fragment)["charts"] if c["reading"] == "power_w")
    assert [s["device"] for s in power["series"]] == attempt.device_indices
    assert "data-window" not in fragment.split('class="telemetry-charts')[0]
