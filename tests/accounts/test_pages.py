"""The API tokens page: make a token (shown once), list them, revoke one."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from npulab.accounts import tokens
from npulab.accounts.models import ApiToken
from npulab.accounts.services import do_issue_api_token

pytestmark = pytest.mark.django_db
PAGE = "/account/tokens/"
PLAIN = re.compile(r"npl_[A-Za-z0-9_-]{43}")


@pytest.fixture
def browser(owner) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def test_the_page_needs_a_login(client) -> None:
    response = client.get(PAGE)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_the_user_menu_links_to_the_page(browser) -> None:
    assert f'href="{PAGE}"' in browser.get("/").content.decode()


def test_create_shows_the_token_once_and_stores_only_its_digest(browser, owner) -> None:
    response = browser.post(
        PAGE, {"name": "nightly ci", "scopes": ["read", "submit"], "expires_days": "30"}
    )
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    html = response.content.decode()
    assert "shown only this once" in html
    [plain] = set(PLAIN.findall(html))
    token = ApiToken.objects.get(user=owner)
    assert token.digest == tokens.digest(plain)
    assert (token.name, token.scopes) == ("nightly ci", ["read", "submit"])
    assert timedelta(days=29) < token.expires - timezone.now() <= timedelta(days=30)

    listed = browser.get(PAGE).content.decode()
    assert plain not in listed
    assert f"{token.display}…" in listed
    assert "nightly ci" in listed

    # The token works against the API, within its scopes.
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {plain}")
    assert api.get("/api/v1/runs/").status_code == 200


def test_create_over_htmx_answers_the_fragment(browser) -> None:
    response = browser.post(PAGE, {"name": "", "scopes": ["read"]}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="tokens">')
    assert "<html" not in html
    assert len(set(PLAIN.findall(html))) == 1
    token = ApiToken.objects.get()
    assert (token.scopes, token.expires) == (["read"], None)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"name": "no scopes", "expires_days": "30"}, "Choose at least one scope."),
        ({"scopes": ["read"], "expires_days": "0"}, "greater than or equal to 1"),
        ({"scopes": ["root"]}, "Select a valid choice."),
    ],
)
def test_a_bad_form_makes_no_token(browser, data: dict, error: str) -> None:
    response = browser.post(PAGE, data)
    assert response.status_code == 200
    assert error in response.content.decode()
    assert not PLAIN.findall(response.content.decode())
    assert ApiToken.objects.count() == 0


def test_the_list_shows_the_users_own_tokens_with_their_status(browser, owner, other_user) -> None:
    do_issue_api_token(owner, name="active one", scopes=["read", "admin"])
    do_issue_api_token(owner, name="old one", expires=timezone.now() - timedelta(days=1))
    do_issue_api_token(other_user, name="not mine")
    html = browser.get(PAGE).content.decode()
    assert "active one" in html
    assert "old one" in html
    assert "not mine" not in html
    assert 'data-scope="admin"' in html
    assert html.count('data-status="expired"') == 2  # the row and its badge
    assert 'data-status="active"' in html


def test_revoke_asks_first_then_refuses_the_token(browser, owner) -> None:
    token, plain = do_issue_api_token(owner, name="ci")
    url = reverse("accounts:token_revoke", args=[token.pk])
    confirm = browser.get(url)
    assert confirm.status_code == 200
    assert "cannot be undone" in confirm.content.decode()
    token.refresh_from_db()
    assert token.revoked is None

    response = browser.post(url)
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked is not None
    assert 'data-status="revoked"' in browser.get(PAGE).content.decode()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {plain}")
    assert api.get("/api/v1/runs/").json()["code"] == "token_revoked"


def test_revoke_over_htmx_answers_the_fragment(browser, owner) -> None:
    token, _ = do_issue_api_token(owner, name="ci")
    url = reverse("accounts:token_revoke", args=[token.pk])
    html = browser.post(url, HTTP_HX_REQUEST="true").content.decode()
    assert html.lstrip().startswith('<div id="tokens">')
    assert "revoked: it is refused from now on" in html


def test_nobody_revokes_another_users_token(browser, other_user) -> None:
    token, _ = do_issue_api_token(other_user)
    url = reverse("accounts:token_revoke", args=[token.pk])
    assert browser.get(url).status_code == 404
    assert browser.post(url).status_code == 404
    token.refresh_from_db()
    assert token.revoked is None
