"""Gunicorn believes X-Forwarded-Proto only from the configured trusted proxies.

Before: gunicorn's own default trusted 127.0.0.1, so any local client made its request
"https" by saying so, and so turned on HSTS and secure cookies for itself.
"""

from __future__ import annotations

import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from npulab.web import stack
from tests.paths import REPO_DIR
from tests.waiting import wait_until


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def gunicorn(trusted: list[str]) -> Iterator[str]:
    """The platform's gunicorn command line, serving an app that echoes the scheme."""
    port = free_port()
    argv = stack.web_argv("127.0.0.1", port, workers=1, threads=1, trusted_proxies=trusted)
    argv[argv.index("npulab.wsgi:application")] = "tests.core.scheme_app:app"
    env = stack.child_env()
    env.pop("FORWARDED_ALLOW_IPS", None)
    process = subprocess.Popen(argv, cwd=REPO_DIR, env=env, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_until(lambda: _answers(url), "gunicorn to answer", timeout=60)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2).close()  # noqa: S310 - our own server
    except OSError:
        return False
    return True


def scheme(url: str) -> str:
    request = urllib.request.Request(url, headers={"X-Forwarded-Proto": "https"})  # noqa: S310
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        return response.read().decode()


def test_a_local_client_cannot_make_its_request_https_by_saying_so() -> None:
    with gunicorn([]) as url:
        assert scheme(url) == "http"


def test_a_configured_trusted_proxy_is_believed() -> None:
    with gunicorn(["127.0.0.1", "::1"]) as url:
        assert scheme(url) == "https"
