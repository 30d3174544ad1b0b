"""The pages of training runs: attempts, checkpoints, restart, comparison."""

from __future__ import annotations

import pytest
from django.test import Client

from npulab.runs.services import do_ingest_events
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
    do_ingest_events(cpu_host, run.pk, 1, 0, 10, [checkpoint_event(49, b"w")])
    run = crash(cpu_host, run, reason="CUDA-like error: device-side assert")
    page = browser.get(f"/runs/{run.pk}/").content.decode()
    assert 'data-attempt="1"' in page
    assert "device-side assert" in page
    assert 'data-step="49"' in page
    assert "On the host" in page
    assert "Restart from checkpoint" in page
    assert f'data-metrics-url="/api/v1/runs/{run.pk}/metrics/"' in page
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
