"""Profiles of a run across hosts: every rank's traces, each host uploading its own ranks',
and the run page's ranks side by side."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from npulab.artifacts.models import Artifact
from npulab.hosts.services import do_issue_host_token
from npulab.profiles.models import Profile
from npulab.runs.models import Run
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import do_claim_run
from tests.conftest import token_client
from tests.profiles.conftest import gz
from tests.profiles.test_capture import store_trace, upload
from tests.runs.test_gangs import gang, host
from workers.contract.events import TRACE

pytestmark = pytest.mark.django_db

TRACE_BYTES = gz(b'{"traceEvents": []}')


@pytest.fixture
def started(owner: Any) -> tuple[Run, Any, Any]:
    a, b = host("cpu-1"), host("cpu-2")
    run = gang(owner, profile={"active": 2})
    place_queued_runs()
    do_claim_run(a, run.pk, 1)
    do_claim_run(b, run.pk, 1)
    run.refresh_from_db()
    return run, a, b


def announced(run_dir: Path, name: str) -> dict[str, Any]:
    path = run_dir / "profiles" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(TRACE_BYTES)
    return {
        "type": "artifact",
        "name": name,
        "path": str(path),
        "bytes": len(TRACE_BYTES),
        "sha256": hashlib.sha256(TRACE_BYTES).hexdigest(),
        "kind": TRACE,
    }


def test_another_host_uploads_its_ranks_traces_each_a_profile_of_its_rank(
    profile_store, started, tmp_path
) -> None:
    run, _, b = started
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {do_issue_host_token(b)}")
    # Node rank 1 holds ranks 2-3.
    events = [announced(tmp_path, "rank3-trace-1.json.gz")]
    assert upload(client, run.pk, tmp_path, events).take_refusals() == []
    assert Artifact.objects.get().name == "rank3-trace-1.json.gz"
    profile = Profile.objects.get()
    assert (profile.name, profile.rank, profile.source) == ("rank3-trace-1.json.gz", 3, "captured")


def test_the_api_gives_and_filters_by_each_profiles_rank(profile_store, started, owner) -> None:
    run, _, _ = started
    store_trace(run, "trace-1.json.gz", TRACE_BYTES)
    store_trace(run, "rank2-trace-1.json.gz", TRACE_BYTES)
    api = token_client(owner)
    listed = api.get(f"/api/v1/runs/{run.pk}/profiles/").json()["results"]
    assert sorted((p["name"], p["rank"]) for p in listed) == [
        ("rank2-trace-1.json.gz", 2),
        ("trace-1.json.gz", 0),
    ]
    only = api.get(f"/api/v1/runs/{run.pk}/profiles/", {"rank": 2}).json()["results"]
    assert [p["name"] for p in only] == ["rank2-trace-1.json.gz"]


def ready(run: Run, name: str, median_us: float, idle_pct: float) -> Profile:
    profile = Profile.objects.get(artifact=store_trace(run, name, TRACE_BYTES))
    profile.status = Profile.Status.READY
    profile.summary = {
        "steps": {"count": 3, "median_us": median_us},
        "ranks": [{"idle_pct": idle_pct, "compute_pct": 100 - idle_pct, "non_compute_pct": 0}],
    }
    profile.save()
    return profile


def test_the_run_page_shows_the_ranks_side_by_side_and_marks_the_slowest(
    profile_store, started, client, owner
) -> None:
    run, _, _ = started
    ready(run, "trace-1.json.gz", 1000, 5)
    ready(run, "rank3-trace-1.json.gz", 4000, 1)
    ready(run, "rank2-trace-1.json.gz", 1100, 30)
    client.force_login(owner)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    view = page.split('id="profile-ranks"')[1].split("</table>")[0]
    rows = view.split("<tr data-rank=")[1:]
    assert [row.split('"')[1] for row in rows] == ["0", "2", "3"]
    assert 'data-slowest="1"' in rows[2]
    assert "4.00 ms" in rows[2]
    assert "30 %" in rows[1]
    # And the list says whose each trace is.
    listed = page.split('id="profile-list"')[1]
    assert '<td class="small" data-rank="3">3</td>' in listed


def test_one_ranks_profiles_need_no_side_by_side(profile_store, started, client, owner) -> None:
    run, _, _ = started
    ready(run, "trace-1.json.gz", 1000, 5)
    client.force_login(owner)
    assert 'id="profile-ranks"' not in client.get(f"/runs/{run.pk}/").content.decode()
