"""A token made by a token: never longer-lived, never wider, revoked with its maker."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from npulab.accounts.models import ApiToken
from npulab.accounts.services import do_revoke_api_token
from npulab.audit import actions
from npulab.audit.models import AuditEntry

pytestmark = pytest.mark.django_db
TOKENS = "/api/v1/tokens/"


def client_with(plain: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {plain}")
    return client


@pytest.mark.parametrize("expires_days", [None, 3650], ids=["never", "ten-years"])
def test_a_token_cannot_make_one_that_outlives_it(owner, token_for, expires_days) -> None:
    client, _ = token_for(
        owner, scopes=["read", "admin"], expires=timezone.now() + timedelta(days=1)
    )
    response = client.post(
        TOKENS, {"name": "child", "scopes": ["read"], "expires_days": expires_days}, format="json"
    )
    assert response.status_code == 400
    assert "may not outlive it" in response.json()["expires_days"][0]
    assert ApiToken.objects.filter(user=owner).count() == 1


def test_a_token_makes_one_within_its_own_life_and_scopes(owner, token_for) -> None:
    client, parent = token_for(
        owner, scopes=["read", "admin"], expires=timezone.now() + timedelta(days=2)
    )
    response = client.post(
        TOKENS, {"name": "child", "scopes": ["read"], "expires_days": 1}, format="json"
    )
    assert response.status_code == 201
    child = ApiToken.objects.get(pk=response.json()["id"])
    assert child.parent == parent
    assert child.expires <= parent.expires
    entry = AuditEntry.objects.get(action=actions.TOKEN_CREATE, target_id=str(child.pk))
    assert entry.data["parent"] == f"{parent.display}…"


def test_a_token_cannot_make_one_with_a_scope_it_lacks(owner, token_for) -> None:
    client, _ = token_for(owner, scopes=["read", "admin"])
    response = client.post(TOKENS, {"scopes": ["read", "submit"]}, format="json")
    assert response.status_code == 403
    assert "it lacks submit" in response.json()["detail"]


def test_revoking_a_token_revokes_what_it_made_and_what_they_made(owner, token_for) -> None:
    client, parent = token_for(owner, scopes=["read", "admin"])
    made = client.post(TOKENS, {"name": "child", "scopes": ["read", "admin"]}, format="json")
    child_client = client_with(made.json()["token"])
    grand = child_client.post(TOKENS, {"name": "grandchild", "scopes": ["read"]}, format="json")
    assert grand.status_code == 201
    # The child revokes its parent: it goes too, and so does what it made.
    assert child_client.post(f"{TOKENS}{parent.pk}/revoke/").status_code == 200
    assert child_client.get(TOKENS).status_code == 401
    assert client_with(grand.json()["token"]).get("/api/v1/runs/").status_code == 401
    assert ApiToken.objects.filter(user=owner, revoked__isnull=True).count() == 0
    entries = AuditEntry.objects.filter(action=actions.TOKEN_REVOKE)
    assert entries.count() == 3
    taken_along = {entry.target_label: entry.data for entry in entries}
    assert taken_along[f"{made.json()['display']}… child"] == {"with": f"{parent.display}…"}


def test_revoking_again_keeps_the_first_time_and_one_audit_entry(owner, token_for) -> None:
    _, token = token_for(owner)
    first = do_revoke_api_token(token).revoked
    assert do_revoke_api_token(token).revoked == first
    assert AuditEntry.objects.filter(action=actions.TOKEN_REVOKE).count() == 1
