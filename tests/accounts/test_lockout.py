"""Guessing is slowed: failed sign-ins and unknown tokens per address, then 429 for a while."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from npulab.accounts.services import do_issue_api_token, do_revoke_api_token
from npulab.hosts.services import do_issue_host_token
from tests.factories import HostFactory, UserFactory

pytestmark = pytest.mark.django_db
RUNS = "/api/v1/runs/"


@pytest.fixture
def three_a_minute(settings) -> Iterator[None]:
    settings.NPULAB = {**settings.NPULAB, "AUTH_FAILURE_RATE": (3, 60)}
    cache.clear()
    yield
    cache.clear()


def client_with(key: str, address: str = "10.0.0.7") -> APIClient:
    client = APIClient(REMOTE_ADDR=address)
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_unknown_user_tokens_from_one_address_are_refused_for_a_while(three_a_minute) -> None:
    guesses = [client_with(f"npl_guess{n:030d}").get(RUNS).status_code for n in range(3)]
    assert guesses == [401, 401, 401]
    _, plain = do_issue_api_token(UserFactory(), name="real")
    refused = client_with(plain).get(RUNS)
    # Even the right token waits: that is what makes guessing slow.
    assert refused.status_code == 429
    assert refused.json()["code"] == "throttled"
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert client_with(plain, address="10.0.0.8").get(RUNS).status_code == 200


def test_unknown_host_tokens_count_too(three_a_minute) -> None:
    for n in range(3):
        client_with(f"nph_guess{n:030d}").post("/api/v1/agent/heartbeat/", {}, format="json")
    host = HostFactory(name="npu-01")
    plain = do_issue_host_token(host)
    response = client_with(plain).post("/api/v1/agent/heartbeat/", {"running": []}, format="json")
    assert response.status_code == 429


def test_a_known_but_revoked_token_is_not_counted_as_a_guess(three_a_minute) -> None:
    token, plain = do_issue_api_token(UserFactory(), name="old")
    do_revoke_api_token(token)
    assert [client_with(plain).get(RUNS).status_code for _ in range(5)] == [401] * 5


def test_failed_sign_ins_lock_the_login_page_for_the_address(client, three_a_minute) -> None:
    UserFactory(username="ada")
    for _ in range(3):
        page = client.post("/login/", {"username": "ada", "password": "wrong"})
        assert page.status_code == 200
    page = client.post("/login/", {"username": "ada", "password": "pw-for-tests-only"})
    assert page.status_code == 429
    assert "Too many failed sign-ins from your address: try again in" in page.content.decode()
    assert "_auth_user_id" not in client.session
