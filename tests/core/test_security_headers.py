"""Browser protection headers; forwarding headers believed from trusted proxies only."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from npulab.core.middleware import client_address, networks
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
PROXY = "10.1.2.3"
TLS = {"HTTP_X_FORWARDED_PROTO": "https"}


@pytest.fixture
def behind_proxy(settings) -> None:
    settings.NPULAB = {**settings.NPULAB, "TRUSTED_PROXIES": [f"{PROXY}/32", "192.168.0.0/16"]}


def sign_in(client: Client, **extra: str):
    UserFactory(username="ada", password="pw-ada-1234")
    client.get("/login/", **extra)
    return client.post("/login/", {"username": "ada", "password": "pw-ada-1234"}, **extra)


def test_every_page_and_api_answer_carries_a_policy_without_inline_script(client) -> None:
    for url in ("/login/", "/api/v1/runs/", "/no-such-page/"):
        policy = client.get(url)["Content-Security-Policy"]
        directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
        assert directives["script-src"] == "'self'"
        assert "'unsafe-inline'" not in directives["script-src"]
        assert "'unsafe-eval'" not in policy
        assert directives["frame-ancestors"] == "'none'"


def test_cookies_are_secure_when_the_trusted_proxy_says_tls(behind_proxy) -> None:
    response = sign_in(Client(REMOTE_ADDR=PROXY), **TLS)
    assert response.status_code == 302
    assert response.cookies["sessionid"]["secure"] is True
    assert response.cookies["csrftoken"]["secure"] is True
    assert response["Strict-Transport-Security"].startswith("max-age=31536000")


def test_a_client_claiming_tls_itself_is_not_believed(behind_proxy) -> None:
    response = sign_in(Client(REMOTE_ADDR="203.0.113.9"), **TLS)
    assert response.status_code == 302
    assert not response.cookies["sessionid"]["secure"]
    assert "Strict-Transport-Security" not in response


def test_without_trusted_proxies_the_forwarding_headers_are_dropped() -> None:
    # The default: no proxy is trusted, even on the loopback address.
    response = sign_in(Client(REMOTE_ADDR="127.0.0.1"), **TLS)
    assert not response.cookies["sessionid"]["secure"]


def test_secure_cookies_setting_makes_them_secure_over_plain_http(settings) -> None:
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    response = sign_in(Client(REMOTE_ADDR="127.0.0.1"))
    assert response.cookies["sessionid"]["secure"] is True


@pytest.mark.parametrize(
    ("forwarded", "expected"),
    [
        ("198.51.100.4", "198.51.100.4"),
        # A client's own X-Forwarded-For is kept to the left of what the proxy appended.
        ("6.6.6.6, 198.51.100.4", "198.51.100.4"),
        # Two trusted proxies in a row: the address the outer one was called from.
        ("198.51.100.4, 192.168.7.7", "198.51.100.4"),
        ("not-an-address, 192.168.7.7", "not-an-address"),
    ],
)
def test_the_client_is_the_last_hop_that_is_not_a_trusted_proxy(forwarded, expected) -> None:
    trusted = networks([f"{PROXY}/32", "192.168.0.0/16"])
    assert client_address(PROXY, forwarded, trusted) == expected


def test_a_bad_trusted_proxy_entry_is_a_configuration_error() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"NPULAB_TRUSTED_PROXIES: 'proxy\.local'"):
        networks(["10.0.0.0/8", "proxy.local"])


def test_sign_in_failures_are_counted_per_client_behind_the_proxy(settings, behind_proxy) -> None:
    settings.NPULAB = {**settings.NPULAB, "AUTH_FAILURE_RATE": (2, 60)}
    cache.clear()
    UserFactory(username="ada", password="pw-ada-1234")

    def attempt(client_ip: str, password: str, spoof: str = "") -> int:
        forwarded = f"{spoof}, {client_ip}" if spoof else client_ip
        client = Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=forwarded)
        return client.post("/login/", {"username": "ada", "password": password}).status_code

    assert [attempt("198.51.100.4", "wrong") for _ in range(2)] == [200, 200]
    # Locked out: a made-up address in front of the proxy's entry changes nothing.
    assert attempt("198.51.100.4", "pw-ada-1234", spoof="1.2.3.4") == 429
    # Another client behind the same proxy is not locked out with it.
    assert attempt("198.51.100.5", "pw-ada-1234") == 302
    cache.clear()
