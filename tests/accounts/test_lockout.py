"""Guessing is slowed: failed sign-ins per address, counted by every process, then 429;
never applied to API or host tokens."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.core.cache import cache
from django.test import Client
from rest_framework.test import APIClient

from npulab.accounts.models import SignInFailure
from npulab.accounts.services import do_issue_api_token, do_revoke_api_token
from npulab.hosts.services import do_issue_host_token
from tests.factories import HostFactory, UserFactory

pytestmark = pytest.mark.django_db
RUNS = "/api/v1/runs/"


@pytest.fixture
def three_a_day(settings) -> Iterator[None]:
    """Three failures in a day's window: no window ends in the middle of a test."""
    settings.NPULAB = {**settings.NPULAB, "AUTH_FAILURE_RATE": (3, 24 * 3600)}
    cache.clear()
    yield
    cache.clear()


def client_with(key: str, address: str = "10.0.0.7") -> APIClient:
    client = APIClient(REMOTE_ADDR=address)
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def sign_in(address: str, password: str) -> int:
    client = Client(REMOTE_ADDR=address)
    return client.post("/login/", {"username": "ada", "password": password}).status_code


def test_a_locked_out_address_still_reaches_the_api_and_the_agent_api(three_a_day) -> None:
    # Before: the lockout also refused tokens, and a flood of failed sign-ins from
    # 127.0.0.1 cut the local host worker off from heartbeats for the rest of the minute.
    UserFactory(username="ada")
    assert [sign_in("127.0.0.1", "wrong") for _ in range(4)] == [200, 200, 200, 429]
    _, plain = do_issue_api_token(UserFactory(), name="real")
    assert client_with(plain, address="127.0.0.1").get(RUNS).status_code == 200
    host = HostFactory(name="local")
    host_token = do_issue_host_token(host)
    beat = client_with(host_token, address="127.0.0.1").post(
        "/api/v1/agent/heartbeat/", {"running": []}, format="json"
    )
    assert beat.status_code == 200


def test_unknown_tokens_never_lock_out_sign_ins_or_tokens(three_a_day) -> None:
    UserFactory(username="ada")
    for n in range(5):
        assert client_with(f"npl_guess{n:030d}").get(RUNS).status_code == 401
        heartbeat = client_with(f"nph_guess{n:030d}").post("/api/v1/agent/heartbeat/", {})
        assert heartbeat.status_code == 401
    _, plain = do_issue_api_token(UserFactory(), name="real")
    assert client_with(plain).get(RUNS).status_code == 200
    assert sign_in("10.0.0.7", "pw-for-tests-only") == 302
    assert not SignInFailure.objects.exists()


def test_the_count_is_shared_by_every_web_process(three_a_day) -> None:
    # Each gunicorn process has its own memory: a count kept there let a flood through
    # once per process. A process that never saw a failure refuses all the same.
    UserFactory(username="ada")
    for _ in range(3):
        assert sign_in("10.0.0.9", "wrong") == 200
        cache.clear()  # what another process's memory holds
    assert sign_in("10.0.0.9", "pw-for-tests-only") == 429
    assert SignInFailure.objects.get(address="10.0.0.9").count == 3


def test_a_known_but_revoked_token_is_refused_each_time(three_a_day) -> None:
    token, plain = do_issue_api_token(UserFactory(), name="old")
    do_revoke_api_token(token)
    assert [client_with(plain).get(RUNS).status_code for _ in range(5)] == [401] * 5


def test_failed_sign_ins_lock_the_login_page_for_the_address(client, three_a_day) -> None:
    UserFactory(username="ada")
    for _ in range(3):
        page = client.post("/login/", {"username": "ada", "password": "wrong"})
        assert page.status_code == 200
    page = client.post("/login/", {"username": "ada", "password": "pw-for-tests-only"})
    assert page.status_code == 429
    assert "Too many failed sign-ins from your address: try again in" in page.content.decode()
    assert "_auth_user_id" not in client.session
