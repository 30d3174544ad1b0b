"""The HTTP side of the supervisor's MLflow API: a threaded server on 127.0.0.1, HTTP/1.1.

Keep-alive matters: MLflow's client sends one request per ``log_metric`` over a session,
and a new connection each time would cost more than the call.

Every process on the host can reach 127.0.0.1: a server given a token answers only
requests that carry it (``Authorization: Bearer``, which MLflow's client sends from
``MLFLOW_TRACKING_TOKEN``), so another run on the host, under another user, cannot read
or write this run's metrics.
"""

from __future__ import annotations

import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from workers.contract.mlflow import (
    ARTIFACT_READ_BYTES,
    MAX_BODY_BYTES,
    ArtifactFile,
    Store,
    handle,
    handle_artifacts,
    is_artifact_request,
)

# What http.client allows a request's headers: a line's length, their number.
_MAX_HEADER_LINE = 65536
_MAX_HEADERS = 100
# serve_forever looks for a shutdown between two polls: at its default of 0.5 s the end of
# every run waited about that long for the server to stop.
_POLL_S = 0.05


class _Headers(dict):
    """A request's headers by lower-cased name; the first of a repeated one counts, as with
    the standard library's."""

    def get(self, name: str, default: Any = None) -> Any:
        return super().get(name.lower(), default)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # A reply is written to a buffer and sent whole when the request is done
    # (handle_one_request flushes): headers and body in one send, so the client wakes once
    # to read it, not once for the headers and again for the body.
    wbufsize = -1
    # And sent at once: with Nagle's algorithm a reply could wait for the client's delayed
    # ACK of the one before, 40 ms a call.
    disable_nagle_algorithm = True
    server: Any

    def parse_request(self) -> bool:
        """The request line and headers, as the standard library's own reads them, but with
        the headers read as ``Name: value`` lines into a dict: its email parser took a third
        of the server's time a call. A request line that is not ``METHOD PATH HTTP/1.x``
        (HTTP/0.9, 2, garbage) gets the standard library's own answer."""
        line = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = line.split()
        if len(words) != 3 or words[2] not in ("HTTP/1.0", "HTTP/1.1"):
            return super().parse_request()
        self.requestline = line
        self.command, self.path, self.request_version = words
        if self.path.startswith("//"):
            self.path = "/" + self.path.lstrip("/")  # as the standard library does
        headers = _Headers()
        for count in range(_MAX_HEADERS + 1):
            raw = self.rfile.readline(_MAX_HEADER_LINE + 1)
            if raw in (b"\r\n", b"\n", b""):
                break
            name, colon, value = str(raw, "iso-8859-1").partition(":")
            if len(raw) > _MAX_HEADER_LINE or count == _MAX_HEADERS:
                self.close_connection = True
                self.send_error(431, "Request header fields too large")
                return False
            if not colon or not name.strip() or name[0] in " \t":
                self.close_connection = True
                self.send_error(400, f"Bad header line {raw[:80]!r}")
                return False
            headers.setdefault(name.strip().lower(), value.strip())
        self.headers = headers  # type: ignore[assignment]
        connection = headers.get("connection", "").lower()
        self.close_connection = connection == "close" or (
            self.request_version == "HTTP/1.0" and connection != "keep-alive"
        )
        if headers.get("expect", "").lower() == "100-continue" and words[2] == "HTTP/1.1":
            return self.handle_expect_100()
        return True

    def handle_expect_100(self) -> bool:
        # The client waits for this before it sends the body: it cannot wait in the buffer.
        ready = super().handle_expect_100()
        self.wfile.flush()
        return ready

    def _serve(self) -> None:
        if not self._authorised():
            self.close_connection = True  # the body is left unread
            self._json(
                401,
                {
                    "error_code": "UNAUTHENTICATED",
                    "message": "This run's MLflow API needs its MLFLOW_TRACKING_TOKEN.",
                },
            )
            return
        url = urlsplit(self.path)
        query: dict[str, str] = dict(parse_qsl(url.query))
        raw_length = self.headers.get("Content-Length") or ""
        if is_artifact_request(url.path):
            # The client quotes an artifact's path (a space, '%'): it is stored unquoted.
            path = unquote(url.path)
            self._artifacts(path, query, int(raw_length) if raw_length.isdigit() else None)
            return
        length = int(raw_length) if raw_length.isdigit() else 0
        if length > MAX_BODY_BYTES:
            body = b""
            self.close_connection = True
            status, reply = (
                400,
                {
                    "error_code": "INVALID_PARAMETER_VALUE",
                    "message": "The request body is too large.",
                },
            )
        else:
            body = self.rfile.read(length) if length else b""
            status, reply = handle(self.server.store, self.command, url.path, query, body)
        self._json(status, reply)

    def _authorised(self) -> bool:
        token = self.server.token
        if token is None:
            return True
        sent = self.headers.get("Authorization") or ""
        scheme, _, value = sent.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip(), token)

    def _artifacts(self, path: str, query: dict[str, str], length: int | None) -> None:
        status, answer = handle_artifacts(
            self.server.store, self.command, path, query, self.rfile, length
        )
        if self.command == "PUT" and status != 200:
            self.close_connection = True  # the body may be left unread
        if not isinstance(answer, ArtifactFile):
            self._json(status, answer)
            return
        with answer.stream:
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(answer.size))
            self.end_headers()
            for block in iter(lambda: answer.stream.read(ARTIFACT_READ_BYTES), b""):
                self.wfile.write(block)

    def _json(self, status: int, reply: dict[str, Any]) -> None:
        data = json.dumps(reply).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass  # every call is in events.jsonl already; the script's stderr stays its own


class MlflowServer:
    """Serves ``store`` on 127.0.0.1 at a free port until ``stop``; with ``token``, only to
    requests that carry it."""

    def __init__(
        self, store: Store, host: str = "127.0.0.1", port: int = 0, token: str | None = None
    ) -> None:
        self.httpd = ThreadingHTTPServer((host, port), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.store = store  # type: ignore[attr-defined]
        self.httpd.token = token  # type: ignore[attr-defined]
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, args=(_POLL_S,), name="mlflow", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
