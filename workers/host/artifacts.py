"""Uploading the files a run announced with ``artifact`` events (traces, reports).

Once the platform has acknowledged an ``artifact`` event, its file is sent through the
artifact store in chunks (workers.host.uploads), declared as the event describes it
(name, kind, size, SHA-256), so the platform keeps it only if the bytes match. The event
comes from the user's code: only a regular file inside the run directory is sent, never
one a path or a link leads out of it. What the platform refused (a trace over its size
limit) is said in the run's log.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from typing import Any

from workers.host.client import PlatformClient
from workers.host.serial import Serial
from workers.host.uploads import CHUNK_BYTES, ChunkedUpload, UploadRefused, UploadStopped
from workers.safefiles import held, touch

log = logging.getLogger(__name__)

# Beside the upload's state in the run's folder: the artifact is done with (stored, or
# refused for good), never to be sent again.
DONE_MARK = ".upload-artifact-{key}.done"


def artifact_path_problem(run_dir: str, path: Any) -> str | None:
    """Why the file an artifact event names may not be uploaded, or None."""
    if not isinstance(path, str) or not path:
        return "the event names no path"
    root = os.path.realpath(run_dir)
    real = _resolved(run_dir, path)
    if os.path.commonpath([root, real]) != root:
        return "it is outside the run directory"
    if not os.path.isfile(real):
        return "it is not a file in the run directory"
    return None


def _resolved(run_dir: str, path: str) -> str:
    return os.path.realpath(path if os.path.isabs(path) else os.path.join(run_dir, path))


def upload_key(event: dict[str, Any]) -> str:
    """What names an announced artifact's upload state and mark: its name and content."""
    name = str(event.get("name") or "")
    return hashlib.sha256(f"{name}\0{event.get('sha256')}".encode()).hexdigest()[:16]


class ArtifactUploader:
    """Uploads announced artifacts one after another beside the run; ``drain`` waits for them."""

    def __init__(
        self,
        client: PlatformClient,
        run_id: int,
        run_dir: str,
        chunk_bytes: int = CHUNK_BYTES,
        give_up: threading.Event | None = None,
    ) -> None:
        """``give_up``: set, the upload under way and those queued stop (the worker shuts
        down; its next start finishes the attempt)."""
        self.client = client
        self.run_id = run_id
        self.run_dir = run_dir
        self.chunk_bytes = chunk_bytes
        # Why each refused artifact was not stored, for the run's log.
        self.refusals: list[str] = []
        self._serial = Serial(self.upload, f"artifacts-{run_id}")
        self._give_up = give_up or threading.Event()
        # An upload stopped by ``give_up``: not done, though nothing waits any more.
        self._stopped = False

    def add(self, event: dict[str, Any]) -> None:
        self._serial.add(event)

    def drain(self) -> bool:
        """Wait until every queued artifact is uploaded; False if ``give_up`` came first."""
        return self._serial.wait_idle(self._give_up) and not self._stopped

    def take_refusals(self) -> list[str]:
        refusals, self.refusals = self.refusals, []
        return refusals

    def upload(self, event: dict[str, Any]) -> None:
        """Upload one announced artifact now, in this thread (``add`` queues it instead)."""
        name = str(event.get("name") or "")
        problem = artifact_path_problem(self.run_dir, event.get("path"))
        if problem:
            self.refusals.append(f"artifact {name!r} not uploaded: {problem}")
            return
        # The run directory, and the folders from it down to the file as the check found
        # them, each opened inside the one before and held: a folder the run swaps for a
        # link since (it runs while its artifacts go up) fails the walk, never leads out.
        inside = os.path.relpath(
            _resolved(self.run_dir, event["path"]), os.path.realpath(self.run_dir)
        )
        if inside.split(os.sep)[0] == os.pardir:
            # Swapped for a link since the check: the second look leads out.
            self.refusals.append(f"artifact {name!r} not uploaded: it is outside the run directory")
            return
        folders, filename = os.path.split(inside)
        try:
            with held(self.run_dir) as top, held(
                self.run_dir, *(folders.split(os.sep) if folders else ())
            ) as folder:
                self._send(event, name, top, os.path.join(folder, filename), inside)
        except OSError as exc:
            # A folder on the way is a link now, or gone.
            self.refusals.append(f"artifact {name!r} not stored: {exc.strerror or exc}")
            log.warning("run %s: artifact %s not stored: %s", self.run_id, name, exc)

    def _send(self, event: dict[str, Any], name: str, top: str, path: str, inside: str) -> None:
        key = upload_key(event)
        done = os.path.join(top, DONE_MARK.format(key=key))
        if os.path.lexists(done):
            # Stored or refused before: an event acknowledged twice, or a later worker
            # process finishing what an earlier one left.
            return
        declaration = {
            "name": name,
            "kind": event.get("kind") or "file",
            "bytes": event.get("bytes"),
            "sha256": event.get("sha256"),
            "step": event.get("step"),
        }
        upload = ChunkedUpload(
            self.client,
            self.run_id,
            path,
            declaration,
            state_path=os.path.join(top, f".upload-artifact-{key}.json"),
            chunk_bytes=self.chunk_bytes,
            give_up=self._give_up,
            shown=os.path.join(self.run_dir, inside),
        )
        try:
            upload.run()
            log.info("run %s: artifact %s stored on the platform", self.run_id, name)
        except (UploadRefused, OSError) as exc:
            if isinstance(exc, UploadRefused):
                detail = exc.body.get("detail") or str(exc)
            else:  # the path leads through the held folder: not worth showing
                detail = exc.strerror or str(exc)
            self.refusals.append(f"artifact {name!r} not stored: {detail}")
            log.warning("run %s: artifact %s not stored: %s", self.run_id, name, exc)
        except UploadStopped:
            self._stopped = True
            log.info("run %s: artifact %s upload stopped; it resumes later", self.run_id, name)
            return
        touch(done)
