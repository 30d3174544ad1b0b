"""Submitting to a project: who may, which project by default, and where its runs go."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from npulab.projects.models import Membership, Project
from npulab.runs.models import Run
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import do_submit_run
from tests.conftest import register, token_client
from tests.factories import HostFactory, UserFactory
from tests.projects.conftest import Site, make_project
from tests.runs.test_submit_form import defaults

pytestmark = pytest.mark.django_db
SMOKE = {"kind": "smoke", "device_type": "cpu"}


def test_a_run_without_a_project_goes_to_the_default_project(owner, cpu_host) -> None:
    reply = token_client(owner).post("/api/v1/runs/", SMOKE, format="json")
    assert reply.status_code == 201, reply.json()
    assert reply.json()["project"] == "default"
    assert Run.objects.get(pk=reply.json()["id"]).project.slug == "default"


def test_a_new_user_is_a_member_of_the_default_project(db: None) -> None:
    user = UserFactory(username="newcomer")
    membership = Membership.objects.get(user=user)
    assert (membership.project.slug, membership.role) == ("default", "member")


@pytest.mark.parametrize(("role", "joined"), [("viewer", "viewer"), ("none", None)])
def test_the_default_role_of_new_users_follows_the_setting(
    settings: Any, db: None, role: str, joined: str | None
) -> None:
    settings.NPULAB = dict(settings.NPULAB, DEFAULT_PROJECT_ROLE=role)
    user = UserFactory(username=f"new-{role}")
    found = Membership.objects.filter(user=user).values_list("role", flat=True).first()
    assert found == joined


def test_the_default_project_is_made_again_when_it_was_deleted(cpu_host) -> None:
    Project.objects.filter(slug="default").delete()
    run = do_submit_run(UserFactory(username="after"), SMOKE)
    assert run.project.slug == "default"
    assert [pool.name for pool in run.project.pools.all()] == ["default"]


def test_a_viewer_may_not_submit_and_is_told_why(site: Site) -> None:
    reply = token_client(site.vera).post(
        "/api/v1/runs/", {**SMOKE, "project": "alpha"}, format="json"
    )
    assert reply.status_code == 403
    assert reply.json() == {
        "code": "permission_denied",
        "detail": "You are a viewer of project 'alpha': only its members and owners may "
        "submit, cancel or restart its runs.",
    }


@pytest.mark.parametrize("slug", ["nope", "alpha"])
def test_a_project_unknown_to_the_user_is_a_400_naming_the_field(site: Site, slug: str) -> None:
    # "alpha" exists, but "other" is not in it: it is answered as if it did not.
    reply = token_client(site.other).post(
        "/api/v1/runs/", {**SMOKE, "project": slug}, format="json"
    )
    assert reply.status_code == 400
    assert reply.json()["project"] == [f"no project '{slug}' that you are a member of"]


def test_a_user_outside_the_default_project_must_name_one(settings: Any, cpu_host) -> None:
    settings.NPULAB = dict(settings.NPULAB, DEFAULT_PROJECT_ROLE="none")
    loner = UserFactory(username="loner")
    reply = token_client(loner).post("/api/v1/runs/", SMOKE, format="json")
    assert reply.status_code == 400
    assert "not a member of the default project" in reply.json()["project"][0]


def test_a_members_run_lands_only_on_hosts_of_the_projects_pools(site: Site) -> None:
    # cpu-01 (default pool) is free; alpha-01 is busy with site.run: the new run waits.
    run = do_submit_run(site.bob, {**SMOKE, "project": "alpha"})
    place_queued_runs()
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    assert "alpha-01: 0 of 1 free" in run.queue_reason
    default_run = do_submit_run(site.bob, SMOKE)
    place_queued_runs()
    default_run.refresh_from_db()
    assert default_run.host.name == "cpu-01"
    more = register(HostFactory(name="alpha-02"))
    more.pool = site.pool
    more.save()
    place_queued_runs()
    run.refresh_from_db()
    assert run.host.name == "alpha-02"


def test_a_named_host_outside_the_projects_pools_is_refused(site: Site) -> None:
    reply = token_client(site.bob).post(
        "/api/v1/runs/", {**SMOKE, "project": "alpha", "host": "cpu-01"}, format="json"
    )
    assert reply.status_code == 400
    assert reply.json()["host"][0].startswith("host 'cpu-01' is not in a pool of project 'alpha'")


def test_a_project_without_hosts_in_its_pools_refuses_runs_unless_they_wait(site: Site) -> None:
    empty = make_project("empty", [], member=site.bob)
    assert empty.pools.count() == 0
    api = token_client(site.bob)
    reply = api.post("/api/v1/runs/", {**SMOKE, "project": "empty"}, format="json")
    assert reply.status_code == 400
    assert reply.json()["project"][0].startswith("no host is in a pool of project 'empty'")
    waiting = api.post(
        "/api/v1/runs/", {**SMOKE, "project": "empty", "wait_for_host": True}, format="json"
    )
    assert waiting.status_code == 201


def test_the_submit_form_offers_the_users_projects_and_submits_to_the_chosen(site: Site) -> None:
    client = Client()
    client.force_login(site.bob)
    form = client.get("/runs/new/").content.decode()
    assert 'value="alpha"' in form
    assert 'value="default" selected' in form
    reply = client.post("/runs/new/", defaults("smoke", project="alpha"))
    assert reply.status_code == 302, reply.content.decode()[:2000]
    assert Run.objects.order_by("-id").first().project.slug == "alpha"
    viewer = Client()
    viewer.force_login(site.vera)
    assert 'value="alpha"' not in viewer.get("/runs/new/").content.decode()
