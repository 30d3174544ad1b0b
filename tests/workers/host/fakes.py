"""An in-memory platform for the host agent's tests.

``FakePlatform`` implements the methods of ``workers.host.client.PlatformClient``
with the platform's rules for an events batch (``runs.services.do_ingest_events``):
applied only when it starts at the held offset, acknowledged again when it is
already held, refused with 409 and ``expected_start`` otherwise. Every call is
recorded; any method can be made unavailable (HTTP 5xx, connection refused) for
the next N calls or until further notice, and a reply can be lost after the
call took effect.
"""

from __future__ import annotations

import collections
import json
import math
import os
import pwd
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from workers.contract.blocks import BLOCKS, DEFAULT_SOURCE
from workers.contract.events import NDJSON, line_event
from workers.host import acl
from workers.host.client import PlatformRejected, PlatformUnavailable
from workers.host.config import HostConfig


def revoke_traverse(user: str, folders: Iterable[str]) -> None:
    """Undo ``runuser.grant_traverse`` on the folders it returned (a test's own grants)."""
    uid = pwd.getpwnam(user).pw_uid
    for folder in folders:
        if os.path.isdir(folder):
            acl.remove_user(folder, uid)


def host_config(work_dir: Path, **overrides: object) -> HostConfig:
    """A host worker on one CPU with quick heartbeats and flushes, and no claim retries."""
    values: dict[str, object] = {
        "url": "http://platform.invalid",
        "token": "host-token",
        "broker_url": "memory://",
        "work_dir": str(work_dir),
        "python": sys.executable,
        "device_type": "cpu",
        "devices": 1,
        "labels": [],
        "heartbeat_s": 0.01,
        "flush_s": 0.05,
        "claim_retry_s": 0.0,
    }
    values.update(overrides)
    return HostConfig(**values)


class FakePlatform:
    """The agent API in memory; thread-safe, like the real one behind gunicorn."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.failed: collections.Counter[str] = collections.Counter()
        self._fail_next: collections.Counter[str] = collections.Counter()
        self._lose_next: collections.Counter[str] = collections.Counter()
        self._down: set[str] = set()
        self._rejections: dict[str, PlatformRejected] = {}
        # Per run: the byte offset the platform holds and the events it stored.
        self.offsets: dict[int, int] = collections.defaultdict(int)
        self.stored: dict[int, list[dict[str, Any]]] = collections.defaultdict(list)
        # Per run: the bytes of the batches stored from the lines form, as they came.
        self.received: dict[int, bytes] = collections.defaultdict(bytes)
        # False: a platform from before the lines form (it answers 415 to them).
        self.takes_lines = True
        # True: a platform that takes the compact form; by default one from before it.
        self.takes_blocks = False
        self.cancel: set[int] = set()
        self.pinned: list[int] = []
        self.claims: dict[int, dict[str, Any]] = {}
        self.finished: list[tuple[int, int, dict[str, Any]]] = []
        self.heartbeat_replies: list[dict[str, Any]] = []
        self.uploads: list[tuple[int, int, str]] = []
        # Artifacts sent through the chunked protocol: upload id -> declaration and bytes.
        self.artifacts: dict[str, dict[str, Any]] = {}
        self.register_reply = {"name": "fake-host", "queue": "host.fake-host"}
        # Handoff files another host of a run handed over: file id -> their bytes.
        self.handoff: dict[int, bytes] = {}
        self.on_snapshot: Callable[[], None] | None = None

    # -- what a test controls ---------------------------------------------

    def fail_next(self, method: str, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` find the platform unavailable."""
        with self.lock:
            self._fail_next[method] += times

    def lose_next_reply(self, method: str, times: int = 1) -> None:
        """The next ``times`` calls take effect, but their replies never arrive."""
        with self.lock:
            self._lose_next[method] += times

    def go_down(self, *methods: str) -> None:
        """These methods (all when none is named) are unavailable until ``come_back``."""
        with self.lock:
            self._down |= set(methods or ("*",))

    def come_back(self) -> None:
        with self.lock:
            self._down.clear()

    def reject(self, method: str, status: int, body: dict[str, Any]) -> None:
        """Every later call of ``method`` is refused with ``status`` and ``body``."""
        with self.lock:
            self._rejections[method] = PlatformRejected(status, body)

    def count(self, method: str) -> int:
        with self.lock:
            return sum(1 for name, _ in self.calls if name == method)

    def batches(self, run_id: int) -> list[tuple[int, int, int]]:
        """(start, end, number of events) of every events batch sent for ``run_id``, in
        either form."""
        with self.lock:
            return [
                (args[2], args[3], len(args[4]))
                for name, args in self.calls
                if name == "send_events" and args[0] == run_id
            ]

    def stored_events(self, run_id: int) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.stored[run_id])

    def stored_lines(self, run_id: int) -> list[str]:
        return [event["line"] for event in self.stored_events(run_id) if event["type"] == "log"]

    # -- the client's methods ---------------------------------------------

    def _enter(self, method: str, *args: Any) -> bool:
        """Record a call; raise as the test asked. True if the reply is to be lost."""
        with self.lock:
            self.calls.append((method, args))
            if method in self._rejections:
                raise self._rejections[method]
            if self._fail_next[method] > 0 or method in self._down or "*" in self._down:
                self._fail_next[method] = max(0, self._fail_next[method] - 1)
                self.failed[method] += 1
                raise PlatformUnavailable(f"fake platform: {method} unavailable")
            if self._lose_next[method] > 0:
                self._lose_next[method] -= 1
                return True
            return False

    @staticmethod
    def _reply(lost: bool, method: str, reply: dict[str, Any]) -> dict[str, Any]:
        if lost:
            raise PlatformUnavailable(f"fake platform: the reply to {method} was lost")
        return reply

    def register(self, facts: dict[str, Any]) -> dict[str, Any]:
        lost = self._enter("register", facts)
        return self._reply(lost, "register", dict(self.register_reply))

    def heartbeat(self, running: list[int]) -> dict[str, Any]:
        lost = self._enter("heartbeat", list(running))
        with self.lock:
            reply = self.heartbeat_replies.pop(0) if self.heartbeat_replies else {}
        return self._reply(lost, "heartbeat", reply)

    def claim(self, run_id: int, attempt: int) -> dict[str, Any]:
        lost = self._enter("claim", run_id, attempt)
        with self.lock:
            if run_id not in self.claims:
                raise PlatformRejected(409, {"detail": f"run {run_id} is not dispatched"})
            reply = dict(self.claims[run_id], run=run_id, attempt=attempt)
        return self._reply(lost, "claim", reply)

    def send_events(
        self, run_id: int, attempt: int, start: int, end: int, events: list[dict[str, Any]]
    ) -> dict[str, Any]:
        return self._store_batch(run_id, attempt, start, end, events, None)

    def send_lines(
        self, run_id: int, attempt: int, start: int, end: int, lines: bytes
    ) -> dict[str, Any]:
        """The lines form: recorded as a ``send_events`` call, its bytes kept as they came."""
        if not self.takes_lines:
            self._enter("send_lines", run_id, attempt, start, end, lines)
            raise PlatformRejected(415, {"detail": f'Unsupported media type "{NDJSON}"'})
        assert len(lines) == end - start, "a lines body is exactly the bytes from start to end"
        events = [line_event(line, json.loads, time.time()) for line in lines.split(b"\n")[:-1]]
        return self._store_batch(run_id, attempt, start, end, events, lines)

    def send_blocks(
        self, run_id: int, attempt: int, start: int, end: int, frames: bytes
    ) -> dict[str, Any]:
        """The compact form: recorded as a ``send_events`` call of the events it stands for
        (a block's points as metric events, a value that was not finite as None)."""
        if not self.takes_blocks:
            self._enter("send_blocks", run_id, attempt, start, end, frames)
            raise PlatformRejected(415, {"detail": f'Unsupported media type "{BLOCKS}"'})
        events: list[dict[str, Any]] = []
        at = 0
        while at < len(frames):
            newline = frames.index(b"\n", at)
            header = json.loads(frames[at:newline])
            payload = frames[newline + 1 : newline + 1 + header["size"]]
            at = newline + 1 + header["size"]
            if "key" not in header:
                events += [line_event(line, json.loads, 0.0) for line in payload.split(b"\n")[:-1]]
                continue
            n = header["points"]
            columns = [
                struct.unpack(f"<{n}{code}", payload[i * 8 * n : (i + 1) * 8 * n])
                for i, code in enumerate("qdd")
            ]
            source = header.get("source", DEFAULT_SOURCE)
            events += [
                {
                    "type": "metric",
                    "time": t,
                    "key": header["key"],
                    "step": s,
                    "value": v if math.isfinite(v) else None,
                    "source": source,
                }
                for s, v, t in zip(*columns, strict=True)
            ]
        return self._store_batch(run_id, attempt, start, end, events, None)

    def _store_batch(
        self,
        run_id: int,
        attempt: int,
        start: int,
        end: int,
        events: list[dict[str, Any]],
        lines: bytes | None,
    ) -> dict[str, Any]:
        lost = self._enter("send_events", run_id, attempt, start, end, list(events), lines)
        with self.lock:
            held = self.offsets[run_id]
            if start != held:
                if end > held:
                    raise PlatformRejected(
                        409,
                        {
                            "detail": f"batch starts at {start}, expected {held}",
                            "expected_start": held,
                        },
                    )
            else:
                self.stored[run_id].extend(events)
                self.received[run_id] += lines if lines is not None else b""
                self.offsets[run_id] = held = end
            reply = {"ack": held, "cancel": run_id in self.cancel, "pinned": list(self.pinned)}
        return self._reply(lost, "send_events", reply)

    def finish(self, run_id: int, attempt: int, report: dict[str, Any]) -> dict[str, Any]:
        lost = self._enter("finish", run_id, attempt, dict(report))
        with self.lock:
            self.finished.append((run_id, attempt, dict(report)))
        return self._reply(lost, "finish", {"status": "done"})

    def upload_snapshot(
        self, snapshot: dict[str, Any], run_id: int | None = None
    ) -> dict[str, Any]:
        lost = self._enter("upload_snapshot", run_id)
        if self.on_snapshot is not None:
            self.on_snapshot()
        reply = {"hash": "0123456789abcdef", "new_version": False, "change": ""}
        return self._reply(lost, "upload_snapshot", reply)

    def upload_checkpoint(self, run_id: int, step: int, path: str) -> dict[str, Any]:
        lost = self._enter("upload_checkpoint", run_id, step, path)
        with self.lock:
            self.uploads.append((run_id, step, os.path.basename(path)))
        return self._reply(lost, "upload_checkpoint", {"step": step, "status": "stored"})

    def create_upload(self, run_id: int, declaration: dict[str, Any]) -> dict[str, Any]:
        lost = self._enter("create_upload", run_id, dict(declaration))
        with self.lock:
            upload_id = f"upload-{len(self.artifacts)}"
            self.artifacts[upload_id] = {"declaration": dict(declaration), "data": b""}
            reply = self._upload_reply(upload_id)
        return self._reply(lost, "create_upload", reply)

    def upload_status(self, run_id: int, upload_id: str) -> dict[str, Any]:
        lost = self._enter("upload_status", run_id, upload_id)
        with self.lock:
            reply = self._upload_reply(upload_id)
        return self._reply(lost, "upload_status", reply)

    def upload_chunk(self, run_id: int, upload_id: str, offset: int, data: bytes) -> dict[str, Any]:
        lost = self._enter("upload_chunk", run_id, upload_id, offset)
        with self.lock:
            self.artifacts[upload_id]["data"] += data
            reply = self._upload_reply(upload_id)
        return self._reply(lost, "upload_chunk", reply)

    def _upload_reply(self, upload_id: str) -> dict[str, Any]:
        upload = self.artifacts[upload_id]
        size = len(upload["data"])
        done = size >= upload["declaration"]["bytes"]
        return {"id": upload_id, "offset": size, "status": "stored" if done else "uploading"}

    def download_handoff(self, run_id: int, file_id: int, write: Callable[[bytes], Any]) -> None:
        self._enter("download_handoff", run_id, file_id)
        with self.lock:
            data = self.handoff.get(file_id)
        if data is None:
            raise PlatformRejected(404, {"detail": f"no handoff file {file_id}"})
        write(data)

    def download_checkpoint(self, run_id: int, step: int, destination: str) -> None:
        self._enter("download_checkpoint", run_id, step, destination)
        raise PlatformRejected(404, {"detail": "the fake platform stores no checkpoints"})


def checkpoint_steps(forwarder: Any) -> list[int]:
    """The steps of the checkpoint events a forwarder (made with ``acted_on=(CHECKPOINT,)``)
    says the platform acknowledged since the last call: what the checkpoints capability
    uploads."""
    return [
        event["step"]
        for event in forwarder.take_acknowledged()
        if event.get("type") == "checkpoint" and isinstance(event.get("step"), int)
    ]
