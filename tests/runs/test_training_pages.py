"""The pages of training runs: attempts, checkpoints, restart, comparison."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from npulab.runs.services import do_ingest_events
from npulab.runs.views import MAX_COMPARED
from npulab.snapshots.services import do_record_snapshot
from tests.factories import RunFactory
from tests.runs.test_attempts import checkpoint_event, crash, started

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(owner) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def test_the_run_page_shows_attempts_checkpoints_and_restart(browser, owner, cpu_host) -> None:
    run = started(owner, cpu_host, max_restarts=0)
    loss = {"type": "metric", "time": 1.0, "key": "loss", "step": 1, "value": 0.5}
    do_ingest_events(cpu_host, run.pk, 1, 0, 10, [checkpoint_event(49, b"w"), loss])
    run = crash(cpu_host, run, reason="CUDA-like error: device-side assert")
    page = browser.get(f"/runs/{run.pk}/").content.decode()
    assert 'data-attempt="1"' in page
    assert "device-side assert" in page
    assert 'data-step="49"' in page
    # The attempt ended without its upload: the checkpoint says so rather than wait for ever.
    assert "not uploaded from cpu-01 before attempt 1 ended" in page
    assert "Restart from checkpoint" in page
    assert f'data-metrics-url="/api/v1/runs/{run.pk}/metrics/"' in page
    # The keys ride along, so the charts start without asking for them.
    assert 'data-keys="[\n  &quot;loss&quot;\n]"' in page
    assert "vendor/uplot/uPlot.iife.min.js" in page

    browser.post(f"/runs/{run.pk}/checkpoints/49/pin/", {"pinned": "1"})
    assert run.checkpoints.get().pinned
    response = browser.post(f"/runs/{run.pk}/restart/")
    assert response.status_code == 302
    run.refresh_from_db()
    assert (run.status, run.attempt) == ("queued", 2)


def test_other_users_cannot_restart_or_pin(client, owner, other_user, cpu_host) -> None:
    run = crash(cpu_host, started(owner, cpu_host, max_restarts=0))
    client.force_login(other_user)
    assert "Restart" not in client.get(f"/runs/{run.pk}/").content.decode()
    client.post(f"/runs/{run.pk}/restart/")
    run.refresh_from_db()
    assert run.status == "failed"


def test_compare_runs_with_their_environments(browser, owner, cpu_host, document) -> None:
    old = do_record_snapshot(cpu_host, document(torch_npu="2.1.0.post8", cann="8.0.RC3")).snapshot
    new = do_record_snapshot(cpu_host, document(torch_npu="2.5.1")).snapshot
    first = RunFactory(snapshot=old, submitted_by=owner)
    second = RunFactory(snapshot=new, submitted_by=owner)
    page = browser.get("/runs/compare/", {"ids": f"{first.pk},{second.pk}", "key": "loss"})
    html = page.content.decode()
    assert 'id="compare-chart"' in html
    assert f"/api/v1/runs/{first.pk}/metrics/" in html
    assert f"/api/v1/runs/{second.pk}/metrics/" in html
    assert 'CANN <span class="mono">8.0.RC3 → 8.1.RC1</span>' in html
    assert 'torch_npu <span class="mono">2.1.0.post8 → 2.5.1</span>' in html


def test_the_run_list_has_a_checkbox_per_run_for_the_compare_form(browser, owner) -> None:
    runs = RunFactory.create_batch(3, submitted_by=owner)
    html = browser.get("/runs/").content.decode()
    assert '<form class="d-flex align-items-center gap-2 ms-3" id="compare-form"' in html
    assert 'action="/runs/compare/"' in html
    for run in runs:
        assert f'form="compare-form" name="ids" value="{run.pk}"' in html
    # The refresh leaves ticks alone: static/npulab/app.js holds it while a box is ticked.
    assert 'hx-trigger="every 5s" hx-swap="innerHTML" data-run-selection' in html
    # The htmx refresh of the table keeps the checkboxes; other run tables have none.
    partial = browser.get("/runs/", headers={"HX-Request": "true"}).content.decode()
    assert f'form="compare-form" name="ids" value="{runs[0].pk}"' in partial
    assert 'name="ids"' not in browser.get("/").content.decode()


def test_compare_twenty_runs_chosen_with_repeated_ids(browser, owner) -> None:
    runs = RunFactory.create_batch(20, submitted_by=owner)
    chosen = [run.pk for run in reversed(runs)]
    page = browser.get("/runs/compare/", {"ids": [*chosen, chosen[0], f" {chosen[1]} "]})
    assert page.status_code == 200
    html = page.content.decode()
    rows = [int(pk) for pk in re.findall(r'<tr data-run="(\d+)">', html)]
    assert rows == chosen
    for pk in chosen:
        assert f"/api/v1/runs/{pk}/metrics/" in html
    assert "left out" not in html
    assert 'class="alert' not in html


def test_compare_more_than_the_maximum_shows_the_first_and_says_how_many_were_left_out(
    browser, owner
) -> None:
    runs = RunFactory.create_batch(MAX_COMPARED + 3, submitted_by=owner)
    # The old comma-separated form and repeated parameters mix.
    first = ",".join(str(run.pk) for run in runs[:5])
    page = browser.get("/runs/compare/", {"ids": [first, *(run.pk for run in runs[5:])]})
    html = page.content.decode()
    rows = [int(pk) for pk in re.findall(r'<tr data-run="(\d+)">', html)]
    assert rows == [run.pk for run in runs[:MAX_COMPARED]]
    left_out = f"{MAX_COMPARED + 3} runs selected: comparing the first {MAX_COMPARED}, 3 left out."
    assert left_out in html


def test_compare_names_ids_that_are_not_runs_instead_of_failing(browser, owner) -> None:
    run = RunFactory(submitted_by=owner)
    page = browser.get(
        "/runs/compare/", {"ids": [str(run.pk), "abc", "-4", "1.5", str(2**70), "999999"]}
    )
    assert page.status_code == 200
    html = page.content.decode()
    assert f"Ignored, not run ids: abc, -4, 1.5, {str(2**70)[:20]}" in html
    assert "No such run: #999999" in html
    assert [int(pk) for pk in re.findall(r'<tr data-run="(\d+)">', html)] == [run.pk]

    nothing = browser.get("/runs/compare/", {"ids": "<script>"}).content.decode()
    assert "Ignored, not run ids: &lt;script&gt;" in nothing
    assert "Name the runs to compare." in nothing
