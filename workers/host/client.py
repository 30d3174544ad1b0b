"""The host worker's side of the REST API (``/api/v1/agent/``), with the host token."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator

import requests

from workers import __version__
from workers.contract.blocks import BLOCKS
from workers.contract.events import NDJSON


class PlatformError(Exception):
    """A call to the platform did not succeed."""


class PlatformUnavailable(PlatformError):
    """The platform could not be reached or answered 5xx/429: try again later."""


class PlatformRejected(PlatformError):
    """The platform refused the call (4xx); retrying the same call will not help."""

    def __init__(self, status: int, body: dict[str, Any]):
        self.status = status
        self.body = body
        super().__init__(f"HTTP {status}: {body.get('detail', body)}")


class PlatformClient:
    """Thin JSON client; one keep-alive session per thread."""

    def __init__(self, url: str, token: str, timeout: float = 15.0):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._headers = {
            "Authorization": f"Token {token}",
            "User-Agent": f"npulab-worker/{__version__}",
        }
        self._local = threading.local()

    def register(self, facts: dict[str, Any]) -> dict[str, Any]:
        return self._post("/api/v1/agent/register/", facts)

    def heartbeat(self, running: list[int]) -> dict[str, Any]:
        return self._post("/api/v1/agent/heartbeat/", {"running": running})

    def claim(self, run_id: int, attempt: int) -> dict[str, Any]:
        return self._post(f"/api/v1/agent/runs/{run_id}/claim/", {"attempt": attempt})

    def send_events(
        self, run_id: int, attempt: int, start: int, end: int, events: list[dict[str, Any]]
    ) -> dict[str, Any]:
        payload = {"attempt": attempt, "start": start, "end": end, "events": events}
        return self._post(f"/api/v1/agent/runs/{run_id}/events/", payload)

    def send_lines(
        self, run_id: int, attempt: int, start: int, end: int, lines: bytes
    ) -> dict[str, Any]:
        """The same batch as ``send_events``, as the file's own bytes from ``start`` to ``end``:
        nothing is parsed or encoded again on this side (the platform reads each line)."""
        return self._request(
            "POST",
            f"{self.url}/api/v1/agent/runs/{run_id}/events/",
            params={"attempt": attempt, "start": start, "end": end},
            data=lines,
            headers={"Content-Type": NDJSON},
        )

    def send_blocks(
        self, run_id: int, attempt: int, start: int, end: int, frames: bytes
    ) -> dict[str, Any]:
        """The same batch as ``send_lines``, its metric lines packed as columns
        (``workers.host.packing``)."""
        return self._request(
            "POST",
            f"{self.url}/api/v1/agent/runs/{run_id}/events/",
            params={"attempt": attempt, "start": start, "end": end},
            data=frames,
            headers={"Content-Type": BLOCKS},
        )

    def finish(self, run_id: int, attempt: int, report: dict[str, Any]) -> dict[str, Any]:
        return self._post(f"/api/v1/agent/runs/{run_id}/finish/", dict(report, attempt=attempt))

    def upload_snapshot(
        self, snapshot: dict[str, Any], run_id: int | None = None
    ) -> dict[str, Any]:
        return self._post("/api/v1/agent/snapshots/", {"snapshot": snapshot, "run": run_id})

    def telemetry(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        """Device samples (``workers.contract.telemetry``); the reply counts what was
        accepted and names each rejected sample: ``{"accepted": N, "rejected": [...]}``."""
        return self._post("/api/v1/agent/telemetry/", {"samples": samples})

    def upload_checkpoint(self, run_id: int, step: int, path: str) -> dict[str, Any]:
        """Stream a checkpoint file to the platform (which checks its size and SHA-256)."""
        url = f"{self.url}/api/v1/agent/runs/{run_id}/checkpoints/{step}/"
        with open(path, "rb") as handle:
            return self._request(
                "PUT", url, data=handle, headers={"Content-Type": "application/octet-stream"}
            )

    def create_upload(self, run_id: int, declaration: dict[str, Any]) -> dict[str, Any]:
        """Declare an artifact (name, kind, bytes, sha256, step); its upload starts at offset 0."""
        return self._post(f"/api/v1/agent/runs/{run_id}/uploads/", declaration)

    def upload_status(self, run_id: int, upload_id: str) -> dict[str, Any]:
        """Where an upload is: ``offset`` (the next chunk's first byte) and ``status``."""
        return self._request("GET", f"{self.url}/api/v1/agent/runs/{run_id}/uploads/{upload_id}/")

    def upload_chunk(self, run_id: int, upload_id: str, offset: int, data: bytes) -> dict[str, Any]:
        """Send the bytes at ``offset``; 409 (PlatformRejected) says the offset expected."""
        return self._request(
            "PUT",
            f"{self.url}/api/v1/agent/runs/{run_id}/uploads/{upload_id}/",
            data=data,
            headers={"Content-Type": "application/octet-stream", "Upload-Offset": str(offset)},
        )

    def download_checkpoint(self, run_id: int, step: int, destination: str, rank: int = 0) -> None:
        """Stream a stored checkpoint file (or its shard of ``rank``) to ``destination``
        (made only once it comes)."""
        url = f"{self.url}/api/v1/agent/runs/{run_id}/checkpoints/{step}/"
        if rank:
            url += f"?rank={rank}"
        with self._stream(url) as chunks, open(destination, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)

    def download_handoff(self, run_id: int, file_id: int, write: Callable[[bytes], Any]) -> None:
        """Stream a file another host of the run handed over, chunk by chunk, to ``write``."""
        with self._stream(f"{self.url}/api/v1/agent/runs/{run_id}/handoff/{file_id}/") as chunks:
            for chunk in chunks:
                write(chunk)

    @contextlib.contextmanager
    def _stream(self, url: str) -> Iterator[Iterator[bytes]]:
        """A download's chunks, once the platform said yes (PlatformRejected if not)."""
        try:
            response = self._session().get(url, stream=True, timeout=self.timeout)
        except requests.RequestException as exc:
            self._local.session = None
            raise PlatformUnavailable(f"{url}: {type(exc).__name__}: {exc}") from exc
        with response:
            self._check(response, url)
            yield self._chunks(response, url)

    def _chunks(self, response: requests.Response, url: str) -> Iterator[bytes]:
        try:
            yield from response.iter_content(chunk_size=1 << 20)
        except requests.RequestException as exc:
            self._local.session = None
            raise PlatformUnavailable(f"{url}: {type(exc).__name__}: {exc}") from exc

    def _session(self) -> requests.Session:
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.headers.update(self._headers)
            self._local.session = session
        return session

    def _post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        return self._request("POST", self.url + path, json=payload)

    def _request(self, method: str, url: str, **kwargs: Any) -> dict[str, Any]:
        try:
            response = self._session().request(method, url, timeout=self.timeout, **kwargs)
        except requests.RequestException as exc:
            # Drop the session: its pooled connection may be half-dead.
            self._local.session = None
            raise PlatformUnavailable(f"{url}: {type(exc).__name__}: {exc}") from exc
        self._check(response, url)
        try:
            body = response.json()
        except ValueError:
            body = {}
        return body if isinstance(body, dict) else {}

    @staticmethod
    def _check(response: requests.Response, url: str) -> None:
        if response.status_code >= 500 or response.status_code == 429:
            # The platform's own words, when it has some (507: the artifact store is full).
            detail = ""
            with contextlib.suppress(ValueError, AttributeError):
                detail = str(response.json().get("detail") or "")[:300]
            raise PlatformUnavailable(
                f"{url}: HTTP {response.status_code}" + (f": {detail}" if detail else "")
            )
        if response.status_code >= 400:
            try:
                body = response.json()
            except ValueError:
                body = {"detail": response.text[:500]}
            raise PlatformRejected(response.status_code, body if isinstance(body, dict) else {})
