"""A profiled run's page leads with its profile's top findings (issue 34, §1)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from npulab.artifacts.models import Artifact
from npulab.profiles.headline import TOP, top_findings
from npulab.profiles.models import Profile
from npulab.profiles.summary import summarise
from tests.runs.test_attempts import started

pytestmark = pytest.mark.django_db


def profile_of(run: Any, summary: dict, status: str = Profile.Status.READY) -> Profile:
    artifact = Artifact.objects.create(
        run=run, attempt=1, name="trace.json.gz", kind="trace", bytes=1, sha256="0" * 64
    )
    return Profile.objects.create(
        run=run,
        artifact=artifact,
        name="trace.json.gz",
        source=Profile.Source.IMPORTED,
        format=Profile.Format.KINETO,
        status=status,
        summary=summary,
        bytes=1,
    )


def headline(page: str) -> str:
    found = re.search(r'<div class="card mb-3" id="profile-headline".*?\n</div>\n', page, re.S)
    assert found, "no profile headline on the page"
    return found.group(0)


def test_the_run_page_leads_with_the_profiles_top_findings(
    client, owner, cpu_host, cuda_traces: Path
) -> None:
    run = started(owner, cpu_host)
    summary = summarise(str(cuda_traces))
    assert len(summary["findings"]) > TOP  # the page shows a few of them, not all
    profile = profile_of(run, summary)
    client.force_login(owner)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    shown = headline(page)
    # Above the run's facts, after the status.
    assert page.index('id="profile-headline"') < page.index('id="run-facts"')
    expected = top_findings(summary["findings"])
    kinds = re.findall(r'data-finding="([^"]+)"', shown)
    assert kinds == [finding["kind"] for finding in expected]
    assert f"all {len(summary['findings'])} findings" in shown
    assert f'href="/profiles/{profile.pk}/timeline/?at={expected[0]["ts_us"]:.3f}' in shown


def test_warnings_come_before_notes_in_the_summarys_order() -> None:
    findings = [
        {"kind": "kernel", "severity": "info"},
        {"kind": "idle", "severity": "warning"},
        {"kind": "step", "severity": "info"},
        {"kind": "sync", "severity": "warning"},
    ]
    assert [f["kind"] for f in top_findings(findings)] == ["idle", "sync", "kernel"]


def test_no_headline_without_a_summarised_profile(client, owner, cpu_host, cuda_traces) -> None:
    run = started(owner, cpu_host)
    client.force_login(owner)
    assert 'id="profile-headline"' not in client.get(f"/runs/{run.pk}/").content.decode()
    profile_of(run, {}, status=Profile.Status.SUMMARISING)
    assert 'id="profile-headline"' not in client.get(f"/runs/{run.pk}/").content.decode()
    profile_of(run, {"trace": {"events": 1}, "findings": []})
    shown = headline(client.get(f"/runs/{run.pk}/").content.decode())
    assert "No findings" in shown
