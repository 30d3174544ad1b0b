"""Every page and API that takes a run: a non-member gets 404, a viewer reads, members change.

The URL lists below are every route that names a run (or a profile of one); a
test walks the URL configuration and fails if a route with a run id is missing
from them, so a new view cannot forget the check.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from npulab.runs.models import Run
from npulab.snapshots.services import do_record_snapshot
from tests.conftest import token_client
from tests.projects.conftest import STEP, Site

pytestmark = pytest.mark.django_db

# (method, URL): {run} a training run with a stored checkpoint, artifact and profile,
# {cov}/{base} two coverage runs, all of project alpha.
PAGES = [
    ("get", "/runs/{run}/"),
    ("get", "/runs/{run}/log/"),
    ("get", "/runs/{run}/log.txt"),
    ("get", "/runs/{run}/bundle/"),
    ("post", "/runs/{run}/cancel/"),
    ("post", "/runs/{run}/restart/"),
    ("post", "/runs/{run}/checkpoints/{step}/pin/"),
    ("get", "/runs/{cov}/coverage/"),
    ("get", "/runs/{cov}/coverage/cell/?op=add&dtype=float32"),
    ("get", "/runs/{cov}/coverage/compare/?baseline={base}"),
    ("get", "/profiles/runs/{run}/"),
    ("post", "/profiles/runs/{run}/import/"),
    ("get", "/profiles/{profile}/timeline/"),
    ("get", "/profiles/{profile}/timeline/window/?start=0&end=10&width=100"),
    ("get", "/profiles/{profile}/timeline/search/?q=add"),
    ("get", "/profiles/{profile}/timeline/events/1/"),
    # The test-only kind's page, from its own folder (tests/kinds/echo/).
    ("get", "/runs/{run}/echo/"),
]
API = [
    ("get", "/api/v1/runs/{run}/"),
    ("get", "/api/v1/runs/{run}/events/"),
    ("get", "/api/v1/runs/{run}/metrics/"),
    ("get", "/api/v1/runs/{run}/checkpoints/"),
    ("get", "/api/v1/runs/{run}/bundle/"),
    ("post", "/api/v1/runs/{run}/cancel/"),
    ("post", "/api/v1/runs/{run}/restart/"),
    ("get", "/api/v1/runs/{run}/checkpoints/{step}/download/"),
    ("post", "/api/v1/runs/{run}/checkpoints/{step}/pin/"),
    ("delete", "/api/v1/runs/{run}/checkpoints/{step}/pin/"),
    ("get", "/api/v1/runs/{run}/artifacts/"),
    ("get", "/api/v1/runs/{run}/artifacts/{artifact}/download/"),
    ("get", "/api/v1/runs/{run}/profiles/"),
    ("post", "/api/v1/runs/{run}/profiles/"),
    ("get", "/api/v1/profiles/{profile}/"),
    ("get", "/api/v1/profiles/{profile}/download/"),
    ("get", "/api/v1/profiles/{profile}/timeline/?start=0&end=10&width=100"),
    ("post", "/api/v1/profiles/{profile}/summarise/"),
    ("get", "/api/v1/runs/{cov}/coverage/"),
    ("get", "/api/v1/runs/{cov}/coverage/summary/"),
    ("get", "/api/v1/runs/{cov}/coverage/compare/?baseline={base}"),
    ("get", "/api/v1/runs/{run}/echo/"),
    ("get", "/api/v1/runs/{parity}/parity/"),
    ("get", "/api/v1/runs/{parity}/parity/loss/?against={run}"),
]
# Reads: a viewer gets what a member gets.
READS = [(method, url) for method, url in PAGES + API if method == "get"]


def url(template: str, site: Site) -> str:
    return template.format(
        run=site.run.pk,
        cov=site.coverage.pk,
        parity=site.parity.pk,
        base=site.coverage_baseline.pk,
        step=STEP,
        artifact=site.artifact.pk,
        profile=site.profile.pk,
    )


def page_client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def answers(client: Any, site: Site, urls: list[tuple[str, str]]) -> dict[str, int]:
    """The status of each URL, by "METHOD path" (one site for the whole list: it is slow)."""
    return {
        f"{method.upper()} {path}": getattr(client, method)(url(path, site)).status_code
        for method, path in urls
    }


def test_every_page_of_a_run_is_404_for_a_non_member(site: Site) -> None:
    found = answers(page_client(site.other), site, PAGES)
    assert {name: status for name, status in found.items() if status != 404} == {}


def test_every_api_of_a_run_is_404_for_a_non_member_and_names_nothing(site: Site) -> None:
    api = token_client(site.other)
    found = answers(api, site, API)
    assert {name: status for name, status in found.items() if status != 404} == {}
    assert api.get(url("/api/v1/runs/{run}/", site)).json()["code"] == "not_found"


def test_a_viewer_reads_everything_a_member_reads(site: Site) -> None:
    pages = [(method, path) for method, path in READS if not path.startswith("/api/")]
    apis = [(method, path) for method, path in READS if path.startswith("/api/")]
    found = {
        **answers(page_client(site.vera), site, pages),
        **answers(token_client(site.vera), site, apis),
    }
    assert {name: status for name, status in found.items() if status == 404} == {}


def _routes(patterns: list[Any], prefix: str = "") -> list[str]:
    found = []
    for entry in patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            found += _routes(entry.url_patterns, route)
        elif isinstance(entry, URLPattern):
            found.append(route)
    return found


def _shape(route: str) -> str:
    """A route with each id as <id> and each step as <step>."""
    route = re.sub(r"<id:\w+>", "<id>", route)
    return re.sub(r"<step:\w+>", "<step>", route)


def test_every_route_that_takes_a_run_or_profile_is_in_the_lists() -> None:
    listed = set()
    for _, path in PAGES + API:
        path = path.split("?")[0].lstrip("/").replace("events/1/", "events/<id>/")
        for name in ("run", "cov", "base", "parity", "profile", "artifact"):
            path = path.replace("{" + name + "}", "<id>")
        listed.add(path.replace("{step}", "<step>"))
    runs = [
        _shape(route)
        for route in _routes(get_resolver().url_patterns)
        if route.startswith(("runs/", "profiles/", "api/v1/runs/", "api/v1/profiles/"))
        and "<id:" in route
        and "drf_format_suffix" not in route
    ]
    assert runs
    assert sorted(set(runs) - listed) == []


def test_a_viewer_may_not_change_a_run(site: Site) -> None:
    api = token_client(site.vera)
    reply = api.post(f"/api/v1/runs/{site.run.pk}/cancel/")
    assert reply.status_code == 403
    assert reply.json()["detail"] == (
        "You are a viewer of project 'alpha': only its members and owners may submit, "
        "cancel or restart its runs."
    )
    assert api.post(f"/api/v1/runs/{site.run.pk}/checkpoints/{STEP}/pin/").status_code == 403
    page = page_client(site.vera).post(f"/runs/{site.run.pk}/cancel/", follow=True)
    assert "You are a viewer of project" in page.content.decode()
    assert Run.objects.get(pk=site.run.pk).cancel_requested is False


def test_an_owner_may_cancel_a_members_run_and_a_member_only_their_own(site: Site) -> None:
    other_member_run = site.coverage_baseline
    other_member_run.submitted_by = site.alice
    other_member_run.status = Run.Status.QUEUED
    other_member_run.save()
    bob = token_client(site.bob)
    reply = bob.post(f"/api/v1/runs/{other_member_run.pk}/cancel/")
    assert reply.status_code == 403
    assert "submitter, its project's owners or staff" in reply.json()["detail"]
    assert token_client(site.alice).post(f"/api/v1/runs/{site.run.pk}/cancel/").status_code == 200


def test_the_run_list_shows_only_visible_runs_and_filters_by_project(site: Site) -> None:
    mine = token_client(site.other)
    default_run = mine.post(
        "/api/v1/runs/", {"kind": "smoke", "device_type": "cpu"}, format="json"
    ).json()
    assert default_run["project"] == "default"
    seen = {run["id"] for run in mine.get("/api/v1/runs/").json()["results"]}
    assert seen == {default_run["id"]}
    vera = token_client(site.vera)
    alpha = {run["id"] for run in vera.get("/api/v1/runs/", {"project": "alpha"}).json()["results"]}
    assert alpha == {site.run.pk, site.coverage.pk, site.coverage_baseline.pk, site.parity.pk}
    default = vera.get("/api/v1/runs/", {"project": "default"}).json()["results"]
    assert [run["id"] for run in default] == [default_run["id"]]
    page = page_client(site.other).get("/runs/").content.decode()
    assert f'data-run="{site.run.pk}"' not in page
    assert f'data-run="{default_run["id"]}"' in page


def test_compare_pages_and_api_treat_an_invisible_run_as_missing(site: Site) -> None:
    page = page_client(site.other).get(f"/runs/compare/?ids={site.run.pk}").content.decode()
    assert f"No such run: #{site.run.pk}" in page
    reply = token_client(site.other).get(
        "/api/v1/runs/compare/", {"baseline": site.coverage.pk, "candidate": site.coverage.pk}
    )
    assert reply.status_code == 400
    assert reply.json()["baseline"] == ["no such run"]
    profiles = page_client(site.other).get(f"/profiles/compare/?a={site.profile.pk}")
    assert f"there is no profile {site.profile.pk}" in profiles.content.decode()


def test_a_superuser_sees_every_project_as_owner(site: Site) -> None:
    root = type(site.other).objects.create_superuser("root", password="pw-for-tests-only")
    api = token_client(root)
    assert api.get(f"/api/v1/runs/{site.run.pk}/").status_code == 200
    assert api.get("/api/v1/projects/alpha/").json()["role"] == "owner"


def test_host_and_snapshot_pages_name_only_the_viewers_runs(site: Site, document: Any) -> None:
    snapshot = do_record_snapshot(site.host, document()).snapshot
    Run.objects.filter(pk=site.run.pk).update(snapshot=snapshot)
    link = f'href="{site.run.get_absolute_url()}"'
    for page in (f"/hosts/{site.host.name}/", f"/snapshots/{snapshot.pk}/"):
        assert link in page_client(site.vera).get(page).content.decode(), page
        outsider = page_client(site.other).get(page).content.decode()
        assert link not in outsider, page
        assert f"#{site.run.pk} " not in outsider, page
