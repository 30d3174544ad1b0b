"""What a user token may do: its scopes, its expiry, its revocation; the fixed cast."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from npulab.accounts.services import do_revoke_api_token
from npulab.runs.models import Run
from npulab.runs.services import do_submit_run
from npulab.snapshots.services import do_record_snapshot
from tests.conftest import make_operator

pytestmark = pytest.mark.django_db
RUNS = "/api/v1/runs/"
SMOKE = {"kind": "smoke", "device_type": "cpu"}


def test_a_read_token_reads_but_cannot_submit(owner, token_for) -> None:
    client, _ = token_for(owner, scopes=["read"])
    assert client.get(RUNS).status_code == 200
    response = client.post(RUNS, SMOKE, format="json")
    assert response.status_code == 403
    body = response.json()
    assert body["code"] == "insufficient_scope"
    assert "lacks the `submit` scope" in body["detail"]
    assert "POST /api/v1/runs/" in body["detail"]
    assert "it has read" in body["detail"]
    assert Run.objects.count() == 0


def test_a_read_token_cannot_cancel_restart_or_pin(owner, token_for, cpu_host) -> None:
    client, _ = token_for(owner, scopes=["read"])
    run = do_submit_run(owner, SMOKE)
    for url in (f"{RUNS}{run.pk}/cancel/", f"{RUNS}{run.pk}/restart/"):
        response = client.post(url)
        assert response.status_code == 403
        assert "`submit` scope" in response.json()["detail"]
    assert client.delete(f"{RUNS}{run.pk}/checkpoints/1/pin/").status_code == 403
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED


def test_a_submit_token_submits_and_cancels_but_does_not_read(owner, token_for, cpu_host) -> None:
    client, _ = token_for(owner, scopes=["submit"])
    created = client.post(RUNS, SMOKE, format="json")
    assert created.status_code == 201
    assert client.post(f"{RUNS}{created.json()['id']}/cancel/").json()["status"] == "cancelled"
    response = client.get(RUNS)
    assert response.status_code == 403
    assert "lacks the `read` scope" in response.json()["detail"]


def test_a_submit_token_cannot_do_the_operator_actions(
    owner, staff, token_for, cpu_host, document
) -> None:
    snapshot = do_record_snapshot(cpu_host, document()).snapshot
    known_good = f"/api/v1/snapshots/{snapshot.pk}/known-good/"
    # Staff or not: the token's scopes decide.
    for user in (owner, staff):
        client, _ = token_for(user, scopes=["read", "submit"])
        for response in (
            client.post(known_good, {"note": "green"}, format="json"),
            client.delete(known_good),
            client.post("/api/v1/hosts/cpu-01/snapshot-request/"),
        ):
            assert response.status_code == 403
            assert response.json()["code"] == "insufficient_scope"
            assert "lacks the `admin` scope" in response.json()["detail"]
    snapshot.refresh_from_db()
    assert snapshot.known_good_at is None


def test_an_admin_token_does_the_operator_actions(owner, token_for, cpu_host, document) -> None:
    make_operator(owner)
    snapshot = do_record_snapshot(cpu_host, document()).snapshot
    client, _ = token_for(owner, scopes=["read", "admin"])
    url = f"/api/v1/snapshots/{snapshot.pk}/known-good/"
    assert client.post(url, {"note": "green"}, format="json").json()["known_good"] is True
    assert client.post("/api/v1/hosts/cpu-01/snapshot-request/").status_code == 202
    # Scopes are separate: admin alone does not submit.
    assert client.post(RUNS, SMOKE, format="json").status_code == 403


def test_scopes_do_not_widen_who_may_act_on_a_run(owner, other_user, token_for, cpu_host) -> None:
    run = do_submit_run(owner, SMOKE)
    client, _ = token_for(other_user, scopes=["read", "submit", "admin"])
    assert client.get(f"{RUNS}{run.pk}/").status_code == 200
    response = client.post(f"{RUNS}{run.pk}/cancel/")
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"


def test_an_expired_token_is_refused_saying_so(owner, token_for) -> None:
    client, token = token_for(owner, expires=timezone.now() - timedelta(seconds=1))
    response = client.get(RUNS)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    body = response.json()
    assert body["code"] == "token_expired"
    assert f"This token ({token.display}…) expired on " in body["detail"]


def test_a_token_works_until_it_expires(owner, token_for) -> None:
    client, _ = token_for(owner, expires=timezone.now() + timedelta(days=1))
    assert client.get(RUNS).status_code == 200


def test_a_revoked_token_is_refused_saying_so(owner, token_for) -> None:
    client, token = token_for(owner)
    assert client.get(RUNS).status_code == 200
    do_revoke_api_token(token)
    response = client.get(RUNS)
    assert response.status_code == 401
    assert response.json()["code"] == "token_revoked"
    assert "was revoked on" in response.json()["detail"]


def test_revoking_twice_keeps_the_first_time(owner, token_for) -> None:
    _, token = token_for(owner)
    first = do_revoke_api_token(token).revoked
    assert do_revoke_api_token(token).revoked == first


def test_an_unknown_token_and_no_token_are_401(anon_api) -> None:
    response = anon_api.get(RUNS)
    assert (response.status_code, response.json()["code"]) == (401, "not_authenticated")
    anon_api.credentials(HTTP_AUTHORIZATION="Token npl_not-a-real-token")
    response = anon_api.get(RUNS)
    assert (response.status_code, response.json()["code"]) == (401, "authentication_failed")


def test_a_host_token_is_still_refused_by_the_user_api(host_api) -> None:
    response = host_api.get(RUNS)
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"
    assert "host tokens may only call /api/v1/agent/" in response.json()["detail"]


def test_a_user_token_of_any_scope_is_refused_by_the_agent_api(owner, token_for) -> None:
    client, _ = token_for(owner, scopes=["read", "submit", "admin"])
    response = client.post("/api/v1/agent/heartbeat/", {"running": []}, format="json")
    assert response.status_code == 403


def test_a_host_token_still_works_on_the_agent_api(host_api) -> None:
    response = host_api.post("/api/v1/agent/heartbeat/", {"running": []}, format="json")
    assert response.status_code == 200


def test_browser_sessions_are_not_scoped(owner, cpu_host, document) -> None:
    make_operator(owner)
    snapshot = do_record_snapshot(cpu_host, document()).snapshot
    session = APIClient()
    session.force_login(owner)
    assert session.post(RUNS, SMOKE, format="json").status_code == 201
    url = f"/api/v1/snapshots/{snapshot.pk}/known-good/"
    assert session.post(url, {"note": "green"}, format="json").status_code == 200


def test_a_token_records_when_it_was_last_used(owner, token_for) -> None:
    client, token = token_for(owner)
    assert token.last_used is None
    client.get(RUNS)
    token.refresh_from_db()
    assert token.last_used is not None


# -- managing tokens through the API (the admin scope) -------------------------------

TOKENS = "/api/v1/tokens/"


def test_an_admin_token_lists_makes_and_revokes_its_users_tokens(
    owner, other_user, token_for
) -> None:
    client, own = token_for(owner, scopes=["read", "submit", "admin"])
    token_for(other_user)
    made = client.post(TOKENS, {"name": "ci", "scopes": ["read"], "expires_days": 7}, format="json")
    assert made.status_code == 201
    body = made.json()
    assert body["token"].startswith("npl_")
    assert (body["name"], body["scopes"], body["status"]) == ("ci", ["read"], "active")
    listed = client.get(TOKENS).json()
    assert [token["id"] for token in listed["results"]] == [body["id"], own.pk]
    assert all("token" not in token for token in listed["results"])

    fresh = APIClient()
    fresh.credentials(HTTP_AUTHORIZATION=f"Token {body['token']}")
    assert fresh.get(RUNS).status_code == 200
    assert client.post(f"{TOKENS}{body['id']}/revoke/").json()["status"] == "revoked"
    assert fresh.get(RUNS).json()["code"] == "token_revoked"


def test_managing_tokens_needs_the_admin_scope(owner, token_for) -> None:
    client, _ = token_for(owner, scopes=["read", "submit"])
    for response in (client.get(TOKENS), client.post(TOKENS, {}, format="json")):
        assert response.status_code == 403
        assert "lacks the `admin` scope" in response.json()["detail"]


def test_a_token_makes_no_token_with_more_scopes_than_its_own(owner, token_for) -> None:
    client, _ = token_for(owner, scopes=["read", "admin"])
    response = client.post(TOKENS, {"scopes": ["read", "submit"]}, format="json")
    assert response.status_code == 403
    assert response.json()["code"] == "insufficient_scope"
    assert "lacks submit" in response.json()["detail"]


def test_nobody_revokes_another_users_token_through_the_api(owner, other_user, token_for) -> None:
    client, _ = token_for(owner, scopes=["admin"])
    _, theirs = token_for(other_user)
    assert client.post(f"{TOKENS}{theirs.pk}/revoke/").status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked is None
