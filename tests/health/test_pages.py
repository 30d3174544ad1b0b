"""The host page's health card and drain buttons, and the health column of the host list."""

from __future__ import annotations

import pytest
from django.test import Client

from npulab.audit.models import AuditEntry
from npulab.health.models import HostHealth
from npulab.health.services import do_drain_host, mark_device_bad
from tests.health.npu_samples import WARNING_8CARD, samples

pytestmark = pytest.mark.django_db


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def card(page: str) -> str:
    return page.split('id="host-health"')[1].split('id="health-changes"')[0]


def test_an_operator_sees_the_drain_form_and_drains_from_the_page(operator, cpu_host) -> None:
    browser = logged_in(operator)
    page = browser.get("/hosts/cpu-01/").content.decode()
    assert 'id="drain-form"' in page
    assert 'data-health="healthy"' in card(page)
    reply = browser.post("/hosts/cpu-01/drain/", {"note": "moving racks"}, follow=True)
    page = reply.content.decode()
    assert "cpu-01 is drained: no new run goes there." in page
    assert "moving racks" in card(page)
    assert 'data-health="drained"' in card(page)
    assert 'id="undrain-form"' in page
    assert AuditEntry.objects.get().action == "health.drain"


def test_a_drain_without_a_note_stores_nothing_and_says_why(operator, cpu_host) -> None:
    reply = logged_in(operator).post("/hosts/cpu-01/drain/", {"note": " "}, follow=True)
    assert "the note is required" in reply.content.decode()
    assert not HostHealth.objects.filter(drained=True).exists()


def test_a_plain_user_sees_no_buttons_and_is_refused(owner, cpu_host) -> None:
    browser = logged_in(owner)
    page = browser.get("/hosts/cpu-01/").content.decode()
    assert 'id="drain-form"' not in page
    assert "Draining needs the operator role." in page
    assert browser.post("/hosts/cpu-01/drain/", {"note": "x"}).status_code == 403
    assert not HostHealth.objects.filter(drained=True).exists()


def test_the_reasons_and_the_history_are_on_the_page(operator, npu_host, send) -> None:
    host = npu_host()
    send(host, lambda t: samples(WARNING_8CARD, t))
    page = logged_in(operator).get("/hosts/npu-01/").content.decode()
    reasons = page.split('id="health-reasons"')[1].split("</ul>")[0]
    assert reasons.count("chip Health is Warning (npu-smi)") == 2
    assert "device 3" in reasons
    assert "device 7" in reasons
    assert 'id="health-changes"' in page


def test_the_host_list_shows_each_hosts_health(operator, cpu_host, npu_host) -> None:
    npu_host()
    do_drain_host(cpu_host, operator, "maintenance")
    page = logged_in(operator).get("/hosts/").content.decode()
    table = page.split('id="host-table"')[1]
    assert 'data-health="drained" title="drained: maintenance"' in table
    assert 'data-health="healthy"' in table


def test_an_operator_clears_a_device_from_the_page(operator, npu_host) -> None:
    host = npu_host()
    mark_device_bad(host, 4, "stability run failed")
    browser = logged_in(operator)
    page = browser.get("/hosts/npu-01/").content.decode()
    assert 'class="d-inline clear-device" data-device="4"' in page
    reply = browser.post("/hosts/npu-01/devices/4/clear/", {"note": ""}, follow=True)
    assert "Device 4 of npu-01 is back in service." in reply.content.decode()
    assert HostHealth.objects.get(host=host).state == "healthy"
