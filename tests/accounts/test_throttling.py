"""The API's rate limit: per token (per user for sessions), 429 with Retry-After."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from rest_framework.test import APIClient

from npulab.conf import Env
from tests.paths import REPO_DIR

pytestmark = pytest.mark.django_db
RUNS = "/api/v1/runs/"


@pytest.fixture
def two_a_minute(settings) -> Iterator[None]:
    settings.NPULAB = {**settings.NPULAB, "API_RATE": (2, 60)}
    cache.clear()
    yield
    cache.clear()


def test_past_the_rate_a_token_gets_429_with_retry_after(owner, token_for, two_a_minute) -> None:
    client, _ = token_for(owner)
    assert [client.get(RUNS).status_code for _ in range(2)] == [200, 200]
    response = client.get(RUNS)
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 60
    body = response.json()
    assert body["code"] == "throttled"
    assert "throttled" in body["detail"]


def test_each_token_has_its_own_count(owner, token_for, two_a_minute) -> None:
    first, _ = token_for(owner)
    second, _ = token_for(owner)
    for _ in range(2):
        first.get(RUNS)
    assert first.get(RUNS).status_code == 429
    assert second.get(RUNS).status_code == 200


def test_a_browser_session_is_limited_per_user(owner, two_a_minute) -> None:
    session = APIClient()
    session.force_login(owner)
    for _ in range(2):
        assert session.get(RUNS).status_code == 200
    assert session.get(RUNS).status_code == 429


def test_host_tokens_are_not_limited(host_api, two_a_minute) -> None:
    beat = {"running": []}
    codes = [
        host_api.post("/api/v1/agent/heartbeat/", beat, format="json").status_code for _ in range(6)
    ]
    assert codes == [200] * 6


@pytest.mark.parametrize(
    ("raw", "rate"),
    [("1200/min", (1200, 60)), ("5/s", (5, 1)), (" 100 / h ", (100, 3600)), ("9/day", (9, 86400))],
)
def test_the_rate_setting_is_parsed(raw: str, rate: tuple[int, int]) -> None:
    assert Env({"NPULAB_API_RATE": raw}).rate("NPULAB_API_RATE", "1/s") == rate


def test_the_rate_setting_has_a_default() -> None:
    assert Env({}).rate("NPULAB_API_RATE", "1200/min") == (1200, 60)


@pytest.mark.parametrize("raw", ["fast", "0/min", "10/week", "-1/min", "1.5/min", "/min", "10"])
def test_a_bad_rate_setting_fails_at_start_up_naming_it(raw: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="NPULAB_API_RATE must be a number"):
        Env({"NPULAB_API_RATE": raw}).rate("NPULAB_API_RATE", "1200/min")


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("NPULAB_API_RATE", "lots", "NPULAB_API_RATE must be a number of requests per"),
        ("NPULAB_CACHE_URL", "memcached://cache:11211", "NPULAB_CACHE_URL must be empty"),
    ],
)
def test_the_platform_does_not_start_with_a_bad_value(name: str, raw: str, message: str) -> None:
    env = {**os.environ, name: raw, "DJANGO_SETTINGS_MODULE": "npulab.settings"}
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=REPO_DIR,
        env={**env, "PYTHONPATH": f"{REPO_DIR / 'platform'}:{REPO_DIR}"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr
    assert message in done.stderr
