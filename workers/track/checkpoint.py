"""Checkpoints that survive a crash mid-write and say when they are damaged.

One directory per step (``step-000000000123``) holding ``state.pt`` and a
``manifest.json`` with its size and SHA-256. A checkpoint is written under a
temporary name, fsynced and renamed into place, so a directory with the final
name is always complete; a damaged one (a disk error, a copy cut short) fails
its checksum and the previous one is used. Standard library here; torch is
passed in by the caller.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from typing import Any, Callable

FORMAT = 1
STATE_FILE = "state.pt"
MANIFEST_FILE = "manifest.json"
PINS_FILE = "pinned.json"
_STEP_DIR = re.compile(r"^step-(\d{12})$")
_TEMPORARY = re.compile(r"^\.step-\d{12}\.tmp-(\d+)$")
_CHUNK = 1 << 20


class CheckpointInfo:
    """Where a complete checkpoint is and what its manifest says."""

    def __init__(self, step: int, path: str, size: int, sha256: str) -> None:
        self.step = step
        self.path = path
        self.bytes = size
        self.sha256 = sha256

    @property
    def state_path(self) -> str:
        return os.path.join(self.path, STATE_FILE)

    def as_event(self) -> dict[str, Any]:
        return {"step": self.step, "path": self.path, "bytes": self.bytes, "sha256": self.sha256}


class _HashingWriter:
    """Hashes what torch.save writes as it writes it: no second read of a large file."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        self.size += len(data)
        return self.handle.write(data)

    def flush(self) -> None:
        self.handle.flush()


def step_dir_name(step: int) -> str:
    return f"step-{step:012d}"


def save(directory: str, step: int, state: dict[str, Any], torch: Any, keep: int) -> CheckpointInfo:
    """Write ``state`` as the checkpoint of ``step`` atomically, then prune to ``keep``."""
    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, step_dir_name(step))
    temporary = os.path.join(directory, f".{step_dir_name(step)}.tmp-{os.getpid()}")
    if os.path.exists(temporary):
        shutil.rmtree(temporary)
    os.makedirs(temporary)
    with open(os.path.join(temporary, STATE_FILE), "wb") as handle:
        writer = _HashingWriter(handle)
        torch.save(state, writer)
        handle.flush()
        os.fsync(handle.fileno())
    manifest = {
        "format": FORMAT,
        "step": step,
        "created": time.time(),
        "files": {STATE_FILE: {"bytes": writer.size, "sha256": writer.digest.hexdigest()}},
    }
    _write_json(os.path.join(temporary, MANIFEST_FILE), manifest)
    _fsync_dir(temporary)
    if os.path.exists(final):
        # The same step again (a resumed attempt reached it anew): replace it.
        shutil.rmtree(final)
    os.rename(temporary, final)
    _fsync_dir(directory)
    prune(directory, keep)
    return CheckpointInfo(step, final, writer.size, writer.digest.hexdigest())


def complete(directory: str) -> list[int]:
    """Steps of the checkpoint directories with their final name, oldest first."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for m in map(_STEP_DIR.match, names) if m)


def verify(directory: str, step: int) -> CheckpointInfo:
    """The checkpoint of ``step`` if its manifest and checksum hold; ValueError says why not."""
    path = os.path.join(directory, step_dir_name(step))
    try:
        with open(os.path.join(path, MANIFEST_FILE), encoding="utf-8") as handle:
            manifest = json.load(handle)
        expected = manifest["files"][STATE_FILE]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"no readable manifest ({type(exc).__name__})") from None
    digest = hashlib.sha256()
    size = 0
    try:
        with open(os.path.join(path, STATE_FILE), "rb") as handle:
            for chunk in iter(lambda: handle.read(_CHUNK), b""):
                digest.update(chunk)
                size += len(chunk)
    except OSError as exc:
        raise ValueError(f"{STATE_FILE} unreadable: {exc.strerror}") from None
    if size != expected.get("bytes"):
        raise ValueError(
            f"{STATE_FILE} has {size} bytes, the manifest says {expected.get('bytes')}"
        )
    if digest.hexdigest() != expected.get("sha256"):
        raise ValueError(f"{STATE_FILE} fails its SHA-256 check")
    return CheckpointInfo(step, path, size, digest.hexdigest())


def latest_valid(directory: str, warn: Callable[[int, str], None]) -> CheckpointInfo | None:
    """The newest checkpoint that verifies; ``warn(step, why)`` for each one skipped."""
    for step in reversed(complete(directory)):
        try:
            return verify(directory, step)
        except ValueError as exc:
            warn(step, str(exc))
    return None


def load(info: CheckpointInfo, torch: Any) -> dict[str, Any]:
    """The saved state, on the CPU: the caller moves what it needs to its device.

    The file holds RNG states and other Python objects, so it is loaded with
    ``weights_only=False``: load only checkpoints this library wrote.
    """
    return torch.load(info.state_path, map_location="cpu", weights_only=False)


def pinned(directory: str) -> set[int]:
    try:
        with open(os.path.join(directory, PINS_FILE), encoding="utf-8") as handle:
            return {int(step) for step in json.load(handle)}
    except (OSError, ValueError, TypeError):
        return set()


def set_pinned(directory: str, steps: set[int]) -> None:
    os.makedirs(directory, exist_ok=True)
    _write_json(os.path.join(directory, PINS_FILE), sorted(steps))


def prune(directory: str, keep: int) -> list[int]:
    """Delete all but the newest ``keep`` checkpoints and the pinned ones; returns the deleted."""
    steps = complete(directory)
    protected = set(steps[-keep:]) | pinned(directory)
    deleted = [step for step in steps if step not in protected]
    for step in deleted:
        shutil.rmtree(os.path.join(directory, step_dir_name(step)), ignore_errors=True)
    for name in os.listdir(directory):
        match = _TEMPORARY.match(name)
        # A temporary directory whose writer is gone is a write cut short.
        if match and not _alive(int(match.group(1))):
            shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
    return deleted


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _write_json(path: str, data: Any) -> None:
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def _fsync_dir(path: str) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
