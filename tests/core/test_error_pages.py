"""404 and 500 pages carry the site's navigation; under /api/ the answers stay JSON error bodies."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import AnonymousUser
from django.db import DatabaseError
from django.test import Client, RequestFactory

from npulab.core.api import not_found, server_error

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(owner) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def test_a_missing_page_has_the_sites_navigation(browser: Client) -> None:
    response = browser.get("/runs/999999/")
    assert response.status_code == 404
    page = response.content.decode()
    assert 'data-status="404"' in page
    assert 'class="navbar' in page
    assert 'href="/runs/"' in page
    assert "Submit run" in page  # the logged-in menu
    assert response["Content-Type"].startswith("text/html")


def test_an_unknown_address_names_itself(browser: Client) -> None:
    page = browser.get("/no/such/page/").content.decode()
    assert "<code>/no/such/page/</code>" in page


def test_an_unknown_api_url_keeps_its_json_error_body(browser: Client) -> None:
    response = browser.get("/api/v1/no-such-endpoint/")
    assert response.status_code == 404
    assert response.json() == {
        "code": "not_found",
        "detail": "No API endpoint at /api/v1/no-such-endpoint/.",
    }


def test_the_500_page_has_the_navigation_of_the_logged_in_user(owner) -> None:
    request = RequestFactory().get("/runs/1/")
    request.user = owner
    response = server_error(request)
    assert response.status_code == 500
    page = response.content.decode()
    assert 'data-status="500"' in page
    assert "Submit run" in page
    assert owner.get_username() in page


def test_the_500_page_answers_when_its_context_cannot_be_built() -> None:
    class Broken:
        @property
        def is_authenticated(self) -> bool:
            raise DatabaseError("the database is gone")

    request = RequestFactory().get("/runs/1/")
    request.user = Broken()
    response = server_error(request)
    assert response.status_code == 500
    page = response.content.decode()
    assert 'data-status="500"' in page
    assert 'href="/"' in page  # the site's brand and links, without the user's menu


def test_an_api_crash_keeps_its_json_error_body() -> None:
    response = server_error(RequestFactory().get("/api/v1/runs/"))
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert json.loads(response.content)["code"] == "server_error"


def test_not_found_answers_html_outside_the_api() -> None:
    request = RequestFactory().get("/hosts/nope/")
    request.user = AnonymousUser()
    response = not_found(request, Exception("no host"))
    assert response.status_code == 404
    assert b'data-status="404"' in response.content
