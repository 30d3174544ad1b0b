"""The htmx pages, through Django's test client (the browser test drives the real thing)."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from npulab.runs.forms import RunSubmitForm
from npulab.runs.models import Run
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import do_claim_run, do_finish_run, do_ingest_events, do_submit_run

pytestmark = pytest.mark.django_db
SMOKE = {"kind": "smoke", "device_type": "cpu"}


@pytest.fixture
def browser(owner) -> Client:
    client = Client()
    client.force_login(owner)
    return client


@pytest.mark.parametrize("path", ["/", "/runs/", "/runs/new/", "/hosts/", "/runs/1/"])
def test_pages_need_a_login(client: Client, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")


def test_login_page_renders_and_logs_in(client: Client, owner) -> None:
    assert client.get("/login/").status_code == 200
    response = client.post("/login/", {"username": "owner", "password": "pw-for-tests-only"})
    assert response.status_code == 302
    assert response["Location"] == "/"


def test_the_form_submits_a_run(browser: Client, cpu_host) -> None:
    form = browser.get("/runs/new/").content.decode()
    assert 'name="train_steps"' in form
    assert 'value="cpu-01"' in form
    response = browser.post(
        "/runs/new/",
        {
            "kind": "smoke",
            "device_type": "cpu",
            "devices": "1",
            "timeout_s": "600",
            "host": "cpu-01",
            "matmul_size": "256",
            "train_steps": "7",
            "seed": "0",
            "name": "from the form",
            "tags": "a, b",
            "priority": "0",
        },
    )
    run = Run.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/runs/{run.pk}/"
    assert (run.name, run.tags, run.requested_host, run.spec["train_steps"]) == (
        "from the form",
        ["a", "b"],
        "cpu-01",
        7,
    )


def test_an_htmx_submit_redirects_the_client(browser: Client, cpu_host) -> None:
    response = browser.post(
        "/runs/new/",
        {
            "kind": "smoke",
            "device_type": "cpu",
            "devices": "1",
            "timeout_s": "60",
            "matmul_size": "64",
            "train_steps": "2",
            "seed": "0",
            "priority": "0",
        },
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    assert response["HX-Redirect"] == f"/runs/{Run.objects.get().pk}/"


def test_bad_form_input_is_shown_and_nothing_is_queued(browser: Client) -> None:
    response = browser.post(
        "/runs/new/",
        {
            "kind": "smoke",
            "device_type": "cpu",
            "devices": "0",
            "timeout_s": "60",
            "matmul_size": "64",
            "train_steps": "2",
            "seed": "0",
            "priority": "0",
        },
    )
    assert response.status_code == 200
    assert "Ensure this value is greater than or equal to 1." in response.content.decode()
    assert Run.objects.count() == 0


def test_the_run_page_polls_until_the_run_ends(browser: Client, owner, cpu_host) -> None:
    run = do_submit_run(owner, SMOKE)
    place_queued_runs()
    do_claim_run(cpu_host, run.pk, 1)
    do_ingest_events(
        cpu_host,
        run.pk,
        1,
        0,
        10,
        [
            {"type": "log", "time": 1.0, "stream": "stderr", "line": "warming up"},
            {"type": "step", "time": 2.0, "name": "device", "status": "pass", "seconds": 1.5},
        ],
    )
    live = browser.get(f"/runs/{run.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert 'hx-trigger="every 1s"' in live
    assert "warming up" in live
    assert 'data-step="device"' in live

    do_ingest_events(
        cpu_host,
        run.pk,
        1,
        10,
        20,
        [{"type": "result", "time": 3.0, "status": "succeeded", "reason": "all steps passed"}],
    )
    do_finish_run(cpu_host, run.pk, 1, {"exit_code": 0})
    done = browser.get(f"/runs/{run.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert "hx-trigger" not in done
    assert 'data-status="succeeded"' in done
    assert "all steps passed" in done
    # Times as in logs, not "Nov. 30, 2026, 2:33 p.m.".
    assert re.search(r"<dt>Finished</dt><dd>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</dd>", done)


def test_a_queued_run_shows_why_it_waits(browser: Client, owner) -> None:
    run = do_submit_run(
        owner, {"kind": "smoke", "device_type": "npu", "devices": 8, "wait_for_host": True}
    )
    place_queued_runs()
    page = browser.get(f"/runs/{run.pk}/").content.decode()
    assert "no registered host could take it (no host is registered yet" in page


def test_cancel_from_the_page(browser: Client, owner, cpu_host) -> None:
    run = do_submit_run(owner, SMOKE)
    response = browser.post(f"/runs/{run.pk}/cancel/")
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert (
        "already cancelled" in browser.post(f"/runs/{run.pk}/cancel/", follow=True).content.decode()
    )


def test_other_users_get_no_cancel_button_and_cannot_cancel(
    client: Client, owner, other_user, cpu_host
) -> None:
    run = do_submit_run(owner, SMOKE)
    client.force_login(other_user)
    assert "Cancel run" not in client.get(f"/runs/{run.pk}/").content.decode()
    client.post(f"/runs/{run.pk}/cancel/")
    run.refresh_from_db()
    assert run.status == "queued"


def test_host_page_shows_devices_and_leases(browser: Client, owner, cpu_host) -> None:
    run = do_submit_run(owner, SMOKE)
    place_queued_runs()
    page = browser.get("/hosts/cpu-01/").content.decode()
    assert f"#{run.pk}" in page
    assert browser.get("/hosts/nope/").status_code == 404


def test_healthz_answers_without_login(client: Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}


def test_the_form_submits_a_training_run_with_its_arguments(browser: Client, cpu_host) -> None:
    form = RunSubmitForm(kind="training")
    data = {name: field.prepare_value(field.initial) for name, field in form.fields.items()}
    data = {name: "" if value is None else value for name, value in data.items()}
    assert data["args"] == ""
    data.update(
        kind="training",
        device_type="cpu",
        entry="builtin:cnn",
        args="--width 8 --label 'two words'",
    )

    response = browser.post("/runs/new/", data)

    run = Run.objects.get()
    assert response.status_code == 302
    assert run.spec["args"] == ["--width", "8", "--label", "two words"]


def test_an_unclosed_quote_in_the_arguments_is_shown(browser: Client) -> None:
    data = {"kind": "training", "device_type": "cpu", "devices": "1", "priority": "0"}
    data.update(entry="builtin:cnn", args="--label 'open", timeout_s="60")

    page = browser.post("/runs/new/", data).content.decode()

    assert "not a valid command line: No closing quotation" in page
    assert not Run.objects.exists()
