"""Chunked, resumable uploads of a run's files to the platform's artifact store.

A file is declared (name, kind, bytes, SHA-256), then sent in chunks at the
offset the platform expects. When the platform cannot be reached the upload
waits with back-off and, before going on, asks the platform where it is:
a chunk sent just before an outage may or may not have arrived. With a
``state_path`` the upload's id survives a restart of the host worker, so a
new attempt at the same file goes on from the platform's offset instead of
from the first byte.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
from typing import Any

from workers.host.client import PlatformClient, PlatformRejected, PlatformUnavailable
from workers.safefiles import open_file, read_text, write_whole

log = logging.getLogger(__name__)

CHUNK_BYTES = 8 << 20
MAX_DELAY_S = 30.0
UPLOADING = "uploading"
STORED = "stored"


class UploadRefused(Exception):
    """The platform will not take the file (damaged, too large, not this host's)."""

    def __init__(self, message: str, status: int, body: dict[str, Any]) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class UploadStopped(Exception):
    """``give_up`` was set before the upload finished; its state stays for a later try."""


def file_digest(path: str) -> tuple[int, str]:
    """Size and SHA-256 of a file, read in blocks."""
    digest = hashlib.sha256()
    size = 0
    with os.fdopen(open_file(path, os.O_RDONLY), "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


class ChunkedUpload:
    """One file's upload; ``run`` returns the platform's final answer once it is stored."""

    def __init__(
        self,
        client: PlatformClient,
        run_id: int,
        path: str,
        declaration: dict[str, Any],
        state_path: str | None = None,
        chunk_bytes: int = CHUNK_BYTES,
        give_up: threading.Event | None = None,
        delay_s: float = 1.0,
        max_delay_s: float = MAX_DELAY_S,
        shown: str = "",
    ) -> None:
        """``shown``: the file's name in messages, where ``path`` leads through a held
        folder (``/proc/self/fd/N/...``, workers.safefiles.held)."""
        self.client = client
        self.run_id = run_id
        self.path = path
        self.shown = shown or path
        self.declaration = dict(declaration)
        if "bytes" not in self.declaration or "sha256" not in self.declaration:
            size, sha256 = file_digest(path)
            self.declaration.update(bytes=size, sha256=sha256)
        self.state_path = state_path
        self.chunk_bytes = chunk_bytes
        self.give_up = give_up or threading.Event()
        self.delay_s = delay_s
        self.max_delay_s = max_delay_s

    def run(self) -> dict[str, Any]:
        """Upload until stored; UploadRefused if refused, UploadStopped on ``give_up``."""
        delay = self.delay_s
        upload: dict[str, Any] | None = None
        stale = False
        while not self.give_up.is_set():
            try:
                if upload is None:
                    upload = self._open()
                elif stale:
                    upload = self.client.upload_status(self.run_id, upload["id"])
                stale = False
                if upload.get("status") != UPLOADING:
                    return self._finished(upload)
                upload = self._send(upload)
                delay = self.delay_s
            except PlatformUnavailable as exc:
                log.warning("run %s: upload of %s waits: %s", self.run_id, self.shown, exc)
                self.give_up.wait(delay)
                delay = min(delay * 2, self.max_delay_s)
                stale = upload is not None
            except PlatformRejected as exc:
                upload = self._rejected(upload, exc)
        raise UploadStopped(f"upload of {self.shown} stopped before it finished")

    def _open(self) -> dict[str, Any]:
        """The upload this file already has on the platform, else a new one."""
        state = self._load_state()
        if state is not None:
            try:
                upload = self.client.upload_status(self.run_id, state["upload"])
            except PlatformRejected as exc:
                if exc.status != 404:
                    raise
                upload = None
            # Given up by the platform while this host was away (or gone): the file is
            # still here, so it is sent again from the start.
            if upload is not None and upload.get("status") != "damaged":
                return upload
            log.info("run %s: upload %s is over, starting again", self.run_id, state["upload"])
            self._clear_state()
        upload = self.client.create_upload(self.run_id, self.declaration)
        self._save_state(upload["id"])
        return upload

    def _send(self, upload: dict[str, Any]) -> dict[str, Any]:
        offset = int(upload["offset"])
        # Not through a link the run put at the name since it was announced.
        descriptor = open_file(self.path, os.O_RDONLY)
        try:
            data = os.pread(descriptor, self.chunk_bytes, offset)
        finally:
            os.close(descriptor)
        if not data:
            # The file is shorter than declared: it changed since; the platform cannot finish.
            raise UploadRefused(
                f"{self.shown} ends at byte {offset}, {self.declaration['bytes']} were declared",
                0,
                upload,
            )
        return self.client.upload_chunk(self.run_id, upload["id"], offset, data)

    def _rejected(
        self, upload: dict[str, Any] | None, exc: PlatformRejected
    ) -> dict[str, Any] | None:
        body = exc.body
        if exc.status == 404 and upload is not None:
            # The platform dropped the upload (expired, or its database restored): start over.
            self._clear_state()
            return None
        if exc.status == 409 and upload is not None and "expected_offset" in body:
            if body.get("status", UPLOADING) == UPLOADING:
                # Another try of this chunk got there first: go on from where it is.
                return dict(upload, offset=int(body["expected_offset"]))
            return self.client.upload_status(self.run_id, upload["id"])
        if exc.status == 422 and body.get("status"):
            return body
        self._clear_state()
        raise UploadRefused(str(exc), exc.status, body) from exc

    def _finished(self, upload: dict[str, Any]) -> dict[str, Any]:
        self._clear_state()
        if upload.get("status") != STORED:
            reason = upload.get("status_reason") or upload.get("status")
            raise UploadRefused(f"the platform did not store {self.shown}: {reason}", 422, upload)
        return upload

    def _load_state(self) -> dict[str, Any] | None:
        if not self.state_path:
            return None
        try:
            # The state sits in the run's folder: never read through a link the run left.
            state = json.loads(read_text(self.state_path))
        except (OSError, ValueError):
            return None
        same_file = isinstance(state, dict) and all(
            state.get(key) == self.declaration[key] for key in ("bytes", "sha256")
        )
        return state if same_file and state.get("upload") else None

    def _save_state(self, upload_id: str) -> None:
        if not self.state_path:
            return
        state = {
            "upload": upload_id,
            "bytes": self.declaration["bytes"],
            "sha256": self.declaration["sha256"],
        }
        write_whole(self.state_path, json.dumps(state).encode("utf-8"))

    def _clear_state(self) -> None:
        if self.state_path:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.state_path)


def upload_file(
    client: PlatformClient,
    run_id: int,
    path: str,
    name: str,
    kind: str,
    step: int | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Upload one file as an artifact of the run; see ChunkedUpload for ``options``."""
    declaration: dict[str, Any] = {"name": name, "kind": kind, "step": step}
    return ChunkedUpload(client, run_id, path, declaration, **options).run()
