"""The smoke kind's section of the compare page: headline numbers, regressions marked."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.utils import timezone

from npulab.runs.models import Run
from tests.factories import RunFactory
from workers.contract import exits

pytestmark = pytest.mark.django_db


def smoke(**summary: float) -> Run:
    return RunFactory(
        status=Run.Status.SUCCEEDED,
        finished_at=timezone.now(),
        result={"status": "succeeded", "summary": {**summary, "device_count": 1}},
        exit_cause=exits.COMPLETED,
    )


def test_two_smoke_runs_compare_by_their_headlines(owner) -> None:
    first = smoke(matmul_gflops=100.0, steps_per_s=50.0)
    slower = smoke(matmul_gflops=80.0, steps_per_s=51.0)
    browser = Client()
    browser.force_login(owner)

    html = browser.get(f"/runs/compare/?ids={first.pk},{slower.pk}").content.decode()

    table = html[html.index('id="compare-numbers"') :]
    headers = re.findall(r'<th class="text-end">([^<]+)</th>', table)
    assert headers == ["matmul_gflops", "steps_per_s"]
    row = table[table.index(f'data-run="{slower.pk}"') :]
    row = row[: row.index("</tr>")]
    assert '<td class="text-end mono" data-regression>80 <span class="small text-danger' in row
    assert "−20%" in row
    # Within the threshold: shown, not marked.
    assert '<td class="text-end mono">51 <span class="small text-muted">+2%</span>' in row


def test_runs_of_two_kinds_get_no_kind_section(owner) -> None:
    trained = RunFactory(
        spec={"kind": "training", "device_type": "cpu", "devices": 1, "entry": "builtin:cnn"}
    )
    browser = Client()
    browser.force_login(owner)
    html = browser.get(f"/runs/compare/?ids={smoke().pk},{trained.pk}").content.decode()
    assert 'id="compare-numbers"' not in html
    assert 'id="environments"' in html
