"""PlatformClient against a tiny HTTP server: how answers map to errors the agent acts on."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from workers import __version__
from workers.host.client import PlatformClient, PlatformRejected, PlatformUnavailable


class Server:
    """Answers every request with the next programmed reply (default: 200 ``{}``)."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, bytes, str]] = []
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with server.lock:
                    server.requests.append(
                        {
                            "method": self.command,
                            "path": self.path,
                            "headers": dict(self.headers),
                            "body": body,
                        }
                    )
                    status, payload, content_type = (
                        server.replies.pop(0) if server.replies else (200, b"{}", "")
                    )
                self.send_response(status)
                self.send_header("Content-Type", content_type or "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = _answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def reply(self, status: int, body: Any = None, raw: bytes | None = None) -> None:
        payload = raw if raw is not None else json.dumps({} if body is None else body).encode()
        content_type = "text/plain" if raw is not None else "application/json"
        with self.lock:
            self.replies.append((status, payload, content_type))

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    server = Server()
    yield server
    server.close()


@pytest.fixture
def client(server: Server) -> PlatformClient:
    return PlatformClient(server.url, "host-token", timeout=10)


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_call_posts_json_with_the_host_token_and_returns_the_reply(
    server: Server, client: PlatformClient
) -> None:
    server.reply(200, {"ack": 42, "cancel": False})
    reply = client.send_events(7, 2, 0, 42, [{"type": "log", "line": "x"}])

    assert reply == {"ack": 42, "cancel": False}
    [request] = server.requests
    assert (request["method"], request["path"]) == ("POST", "/api/v1/agent/runs/7/events/")
    assert request["headers"]["Authorization"] == "Token host-token"
    assert request["headers"]["User-Agent"] == f"npulab-worker/{__version__}"
    assert json.loads(request["body"]) == {
        "attempt": 2,
        "start": 0,
        "end": 42,
        "events": [{"type": "log", "line": "x"}],
    }


def test_finish_sends_the_report_with_the_attempt(server: Server, client: PlatformClient) -> None:
    client.finish(7, 3, {"exit_code": 0})
    [request] = server.requests
    assert request["path"] == "/api/v1/agent/runs/7/finish/"
    assert json.loads(request["body"]) == {"exit_code": 0, "attempt": 3}


@pytest.mark.parametrize("status", [500, 502, 503, 429])
def test_server_errors_and_throttling_are_unavailable(
    server: Server, client: PlatformClient, status: int
) -> None:
    server.reply(status, {"detail": "busy"})
    with pytest.raises(PlatformUnavailable, match=f"HTTP {status}"):
        client.heartbeat([1])


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409])
def test_client_errors_are_rejections_with_the_body(
    server: Server, client: PlatformClient, status: int
) -> None:
    server.reply(status, {"detail": "no", "expected_start": 10})
    with pytest.raises(PlatformRejected) as caught:
        client.claim(7, 1)
    assert caught.value.status == status
    assert caught.value.body == {"detail": "no", "expected_start": 10}
    assert "no" in str(caught.value)


def test_a_rejection_without_json_keeps_the_text_as_detail(
    server: Server, client: PlatformClient
) -> None:
    server.reply(403, raw=b"<html>Forbidden</html>")
    with pytest.raises(PlatformRejected) as caught:
        client.register({})
    assert caught.value.body == {"detail": "<html>Forbidden</html>"}


@pytest.mark.parametrize("raw", [b"", b"not json", b"[1, 2]"])
def test_a_success_that_is_not_a_json_object_reads_as_empty(
    server: Server, client: PlatformClient, raw: bytes
) -> None:
    server.reply(200, raw=raw)
    assert client.heartbeat([]) == {}


def test_connection_refused_is_unavailable_and_the_client_recovers(server: Server) -> None:
    down = PlatformClient(f"http://127.0.0.1:{free_port()}", "host-token", timeout=10)
    with pytest.raises(PlatformUnavailable, match="ConnectionError"):
        down.heartbeat([])

    # The same client object works once the platform answers at that address.
    down.url = server.url.rstrip("/")
    server.reply(200, {"cancel": []})
    assert down.heartbeat([]) == {"cancel": []}


def test_a_platform_that_does_not_answer_in_time_is_unavailable() -> None:
    # Accepts connections (the kernel's backlog) and never answers.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        client = PlatformClient(f"http://127.0.0.1:{port}", "host-token", timeout=0.3)
        with pytest.raises(PlatformUnavailable, match="Timeout"):
            client.heartbeat([])


def test_download_checkpoint_streams_the_file(
    server: Server, client: PlatformClient, tmp_path: Path
) -> None:
    data = bytes(range(256)) * 1000
    server.reply(200, raw=data)
    destination = tmp_path / "state.pt"
    client.download_checkpoint(7, 300, str(destination))

    assert destination.read_bytes() == data
    assert server.requests[0]["method"] == "GET"
    assert server.requests[0]["path"] == "/api/v1/agent/runs/7/checkpoints/300/"


def test_download_of_a_missing_checkpoint_is_rejected_and_writes_nothing(
    server: Server, client: PlatformClient, tmp_path: Path
) -> None:
    server.reply(404, {"detail": "Not found."})
    destination = tmp_path / "state.pt"
    with pytest.raises(PlatformRejected) as caught:
        client.download_checkpoint(7, 300, str(destination))
    assert caught.value.status == 404
    assert not destination.exists()
