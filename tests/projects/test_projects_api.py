"""The projects API: who sees which project, who makes them, owners manage members; the audit."""

from __future__ import annotations

import pytest

from npulab.audit.models import AuditEntry
from npulab.hosts.models import Host
from npulab.projects.models import Membership
from tests.conftest import token_client
from tests.projects.conftest import Site

pytestmark = pytest.mark.django_db
PROJECTS = "/api/v1/projects/"


def test_a_user_lists_the_projects_they_have_a_role_in_with_that_role(site: Site) -> None:
    mine = token_client(site.vera).get(PROJECTS).json()
    assert {(p["slug"], p["role"]) for p in mine["results"]} == {
        ("alpha", "viewer"),
        ("default", "member"),
    }
    assert [p["slug"] for p in token_client(site.other).get(PROJECTS).json()["results"]] == [
        "default"
    ]
    assert token_client(site.other).get(f"{PROJECTS}alpha/").status_code == 404
    detail = token_client(site.vera).get(f"{PROJECTS}alpha/").json()
    assert detail["pools"] == ["alpha-pool"]
    assert {m["user"]: m["role"] for m in detail["members"]} == {
        "alice": "owner",
        "bob": "member",
        "vera": "viewer",
    }


def test_only_operators_create_projects_and_the_maker_owns_it(site: Site, operator) -> None:
    body = {"slug": "beta", "name": "Beta", "pools": ["alpha-pool"]}
    refused = token_client(site.alice).post(PROJECTS, body, format="json")
    assert refused.status_code == 403
    assert "operator role" in refused.json()["detail"]
    made = token_client(operator).post(PROJECTS, body, format="json")
    assert made.status_code == 201, made.json()
    assert made.json()["members"] == [
        {**made.json()["members"][0], "user": "oper", "role": "owner"}
    ]
    again = token_client(operator).post(PROJECTS, body, format="json")
    assert again.status_code == 400
    assert again.json()["slug"] == ["a project 'beta' exists already"]
    entry = AuditEntry.objects.get(action="project.create")
    assert (entry.actor_label, entry.target_id, entry.data) == (
        "oper",
        "beta",
        {"pools": ["alpha-pool"]},
    )


def test_owners_add_change_and_remove_members_and_each_is_audited(site: Site) -> None:
    alice = token_client(site.alice)
    added = alice.post(f"{PROJECTS}alpha/members/", {"user": "other", "role": "viewer"})
    assert added.status_code == 201, added.json()
    assert token_client(site.other).get(f"/api/v1/runs/{site.run.pk}/").status_code == 200
    changed = alice.patch(f"{PROJECTS}alpha/members/other/", {"role": "member"}, format="json")
    assert changed.json()["role"] == "member"
    assert alice.delete(f"{PROJECTS}alpha/members/other/").status_code == 204
    assert token_client(site.other).get(f"/api/v1/runs/{site.run.pk}/").status_code == 404
    actions = list(
        AuditEntry.objects.filter(target_type="project")
        .order_by("id")
        .values_list("action", "data")
    )
    assert actions == [
        ("project.add_member", {"user": "other", "role": "viewer"}),
        ("project.change_member", {"user": "other", "role": "member", "was": "viewer"}),
        ("project.remove_member", {"user": "other", "role": "member"}),
    ]


def test_members_and_viewers_may_not_manage_members(site: Site) -> None:
    for user in (site.bob, site.vera):
        reply = token_client(user).post(f"{PROJECTS}alpha/members/", {"user": "other"})
        assert reply.status_code == 403
        assert "only its owners may manage its members" in reply.json()["detail"]
    assert (
        token_client(site.other).post(f"{PROJECTS}alpha/members/", {"user": "other"}).status_code
        == 404
    )


def test_the_last_owner_stays_an_owner(site: Site) -> None:
    alice = token_client(site.alice)
    reply = alice.patch(f"{PROJECTS}alpha/members/alice/", {"role": "member"}, format="json")
    assert reply.status_code == 409
    assert "last owner" in reply.json()["detail"]
    assert alice.delete(f"{PROJECTS}alpha/members/alice/").status_code == 409
    assert Membership.objects.get(user=site.alice, project=site.alpha).role == "owner"


def test_an_operator_moves_a_host_to_a_pool_and_it_is_audited(site: Site, operator) -> None:
    refused = token_client(site.alice).post("/api/v1/hosts/cpu-01/pool/", {"pool": "alpha-pool"})
    assert refused.status_code == 403
    moved = token_client(operator).post("/api/v1/hosts/cpu-01/pool/", {"pool": "alpha-pool"})
    assert moved.status_code == 200, moved.json()
    assert moved.json()["pool"] == "alpha-pool"
    assert Host.objects.get(name="cpu-01").pool == site.pool
    entry = AuditEntry.objects.filter(action="host.move_to_pool", actor_label="oper").get()
    assert (entry.target_id, entry.data) == ("cpu-01", {"pool": "alpha-pool", "was": "default"})


def test_pools_list_their_hosts_and_projects_and_operators_make_them(site: Site, operator) -> None:
    pools = token_client(site.bob).get("/api/v1/pools/").json()["results"]
    assert {p["name"]: (p["hosts"], p["projects"]) for p in pools} == {
        "alpha-pool": (["alpha-01"], ["alpha"]),
        "default": (["cpu-01"], ["default"]),
    }
    assert token_client(site.bob).post("/api/v1/pools/", {"name": "gpu"}).status_code == 403
    assert token_client(operator).post("/api/v1/pools/", {"name": "gpu"}).status_code == 201
