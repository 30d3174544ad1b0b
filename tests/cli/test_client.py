"""The REST client's edges that a live Django server does not produce: 429, 5xx, retries."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from workers.cli import runs
from workers.cli.client import ApiError, Client, describe_error_body, resolve
from workers.contract import exits


class Scripted(BaseHTTPRequestHandler):
    """Answers each request with the next (status, headers, body) of ``server.script``."""

    def do_GET(self) -> None:
        status, headers, body = self.server.script.pop(0)  # type: ignore[attr-defined]
        self.server.seen.append(self.path)  # type: ignore[attr-defined]
        payload = json.dumps(body).encode()
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    httpd.script, httpd.seen = [], []  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def client(server: ThreadingHTTPServer, waits: list[float]) -> Client:
    return Client(f"http://127.0.0.1:{server.server_address[1]}", "npl_x", sleep=waits.append)


def test_429_waits_for_retry_after_and_tries_again(server) -> None:
    server.script += [(429, {"Retry-After": "3"}, {}), (429, {}, {}), (200, {}, {"ok": True})]
    waits: list[float] = []
    assert client(server, waits).get("kinds/") == {"ok": True}
    assert waits == [3.0, 1.0]
    assert len(server.seen) == 3


def test_429_that_does_not_end_exits_6(server) -> None:
    server.script += [
        (429, {"Retry-After": "120"}, {"code": "throttled", "detail": "slow down"})
    ] * 5
    waits: list[float] = []
    with pytest.raises(ApiError) as raised:
        client(server, waits).get("kinds/")
    assert raised.value.exit_code == exits.CLI_UNREACHABLE
    assert "rate limited" in raised.value.message
    assert "slow down" in raised.value.message
    assert waits == [60.0] * 4  # Retry-After is capped


def test_5xx_is_retried_for_reads_then_exits_6(server) -> None:
    server.script += [(503, {}, {"detail": "down"}), (200, {}, [1])]
    assert client(server, []).get("kinds/") == [1]
    server.script += [(500, {}, {"code": "server_error", "detail": "boom"})]
    with pytest.raises(ApiError) as raised:
        client(server, []).get("kinds/")
    assert raised.value.exit_code == exits.CLI_UNREACHABLE
    assert raised.value.transient
    assert "HTTP 500" in raised.value.message
    assert "boom" in raised.value.message


def test_error_bodies_read_as_fields_or_detail() -> None:
    assert describe_error_body(
        {
            "code": "invalid",
            "detail": "devices: must be at least 1",
            "devices": ["must be at least 1"],
        }
    ) == ["devices: must be at least 1"]
    assert describe_error_body({"code": "not_found", "detail": "No Run matches."}) == [
        "No Run matches."
    ]
    assert describe_error_body("<html>bad gateway</html>") == ["<html>bad gateway</html>"]


def test_url_and_token_come_from_the_environment_before_the_config_file(
    monkeypatch, tmp_path
) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"url": "https://from-file/", "token": "npl_file"}))
    monkeypatch.setenv("NPULAB_CONFIG", str(config))
    monkeypatch.delenv("NPULAB_URL", raising=False)
    monkeypatch.delenv("NPULAB_TOKEN", raising=False)
    assert resolve() == ("https://from-file", "npl_file")
    monkeypatch.setenv("NPULAB_TOKEN", "npl_env")
    assert resolve() == ("https://from-file", "npl_env")
    assert resolve("http://given:1") == ("http://given:1", "npl_env")


class FakeClient:
    """Answers GET runs/1/ from a list of run documents or ApiErrors, in turn."""

    def __init__(self, answers: list) -> None:
        self.answers = answers

    def get(self, path: str, **params: object) -> object:
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_waiting_rides_out_a_short_outage_but_not_a_refusal() -> None:
    outage = ApiError("down", exits.CLI_UNREACHABLE, transient=True)
    now = [0.0]
    fake = FakeClient(
        [{"id": 1, "status": "running"}, outage, outage, {"id": 1, "status": "succeeded"}]
    )
    seen: list[str] = []
    run, code = runs.wait(
        fake,  # type: ignore[arg-type]
        1,
        on_update=lambda run, elapsed: seen.append(run["status"]),
        clock=lambda: now[0],
        sleep=lambda s: now.__setitem__(0, now[0] + s),
    )
    assert (run["status"], code) == ("succeeded", exits.CLI_SUCCEEDED)
    assert seen == ["running", "running", "running", "succeeded"]

    refused = ApiError("not authorised", exits.CLI_UNREACHABLE, status=401)
    with pytest.raises(ApiError):
        runs.wait(FakeClient([{"id": 1, "status": "running"}, refused]), 1, sleep=lambda s: None)  # type: ignore[arg-type]


def test_a_long_outage_while_waiting_exits_6() -> None:
    outage = ApiError("down", exits.CLI_UNREACHABLE, transient=True)
    now = [0.0]
    fake = FakeClient([{"id": 1, "status": "running"}] + [outage] * 1000)
    with pytest.raises(ApiError) as raised:
        runs.wait(
            fake,  # type: ignore[arg-type]
            1,
            clock=lambda: now[0],
            sleep=lambda s: now.__setitem__(0, now[0] + s),
        )
    assert raised.value.exit_code == exits.CLI_UNREACHABLE
    assert now[0] > runs.OUTAGE_GRACE_S
